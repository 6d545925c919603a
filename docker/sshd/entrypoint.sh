#!/bin/sh
# Start sshd as a test host: fresh host keys (an image must not bake one set into every host),
# the key in $AUTHORIZED_KEY for root and for the sudo user "fence", and cgroups writable as on a
# real host: on v1 the engine mounts the freezer and cpu hierarchies read-only, so they are mounted
# again read-write (the container runs in its own cgroup namespace with CAP_SYS_ADMIN); on v2 the
# entrypoint leaves the root cgroup, as on a real host, so controllers can be delegated.
set -e
ssh-keygen -A >/dev/null
for home in /root /home/fence; do
    mkdir -p "$home/.ssh"
    printf '%s\n' "$AUTHORIZED_KEY" >"$home/.ssh/authorized_keys"
    chmod 700 "$home/.ssh"
    chmod 600 "$home/.ssh/authorized_keys"
done
chown -R fence:fence /home/fence/.ssh
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
    mkdir -p /sys/fs/cgroup/init
    echo $$ >/sys/fs/cgroup/init/cgroup.procs
else
    for controller in freezer cpu; do
        if [ -d "/sys/fs/cgroup/$controller" ] && ! touch "/sys/fs/cgroup/$controller" 2>/dev/null; then
            umount "/sys/fs/cgroup/$controller"
            mount -t cgroup -o "rw,nosuid,nodev,noexec,$controller" cgroup "/sys/fs/cgroup/$controller"
        fi
    done
fi
exec /usr/sbin/sshd -D -e
