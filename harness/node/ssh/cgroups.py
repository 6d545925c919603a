"""Where fencecheck's cgroups live on a real host, and the shell that freezes and throttles them.

Every daemon the harness starts goes into a cgroup of its own, ``fencecheck/<daemon>``, under
both the freezer and the CPU controller (one unified tree on cgroup v2; the ``freezer`` and ``cpu``
hierarchies on v1). Freezing or capping the parent ``fencecheck`` cgroup acts on every daemon of
the node at once and on nothing else: the host's sshd and our own commands are never frozen,
so the control connection keeps working during a freeze.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Final

__all__ = ["PROBE", "CgroupLayout", "parse_probe"]

GROUP: Final = "fencecheck"

PROBE: Final = (
    'awk \'$3=="cgroup"||$3=="cgroup2"{print $3, $2, $4}\' /proc/self/mounts; '
    "for m in $(awk '$3==\"cgroup2\"{print $2}' /proc/self/mounts); do "
    'echo "controllers $m $(tr " " , <"$m/cgroup.controllers" 2>/dev/null)"; done'
)
"""Lists the cgroup mounts (type, path, options) and each v2 mount's available controllers."""

# How often a confirmation loop re-reads the kernel's state.
_POLL: Final = "sleep 0.002"


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """The host's cgroup version and the parent cgroup of our daemons for each controller.

    ``freezer`` or ``cpu`` is ``None`` when the host offers no writable controller for it; the
    fault then fails with a message instead of silently doing nothing.
    """

    version: int
    freezer: str | None
    cpu: str | None
    root_v2: str | None = None
    """The v2 mount point, whose ``cgroup.subtree_control`` must enable ``cpu``."""

    def describe(self) -> str:
        """``v2: freezer, cpu`` or ``none``: for the doctor."""
        if self.version == 0:
            return "none"
        parts = [name for name, where in (("freezer", self.freezer), ("cpu", self.cpu)) if where]
        return f"v{self.version}: {', '.join(parts) or 'no usable controller'}"

    def daemon_dirs(self, daemon: str) -> list[str]:
        """The cgroup directories ``daemon``'s process must join (one per hierarchy)."""
        parents = dict.fromkeys(p for p in (self.freezer, self.cpu) if p)
        return [f"{parent}/{daemon}" for parent in parents]

    def prepare_script(self) -> str:
        """Create our parent cgroups and, on v2, delegate the CPU controller to them."""
        lines = [f"mkdir -p {shlex.quote(d)}" for d in dict.fromkeys((self.freezer, self.cpu)) if d]
        if self.version == 2 and self.cpu and self.root_v2:
            control = shlex.quote(f"{self.root_v2}/cgroup.subtree_control")
            lines.append(f"grep -qw cpu {control} || echo +cpu >{control}")
        return " && ".join(lines) or "true"

    def freeze_script(self, frozen: bool) -> str | None:
        """Freeze (or thaw) our parent cgroup and wait until the kernel reports it done."""
        if self.freezer is None:
            return None
        where = shlex.quote(self.freezer)
        if self.version == 2:
            value = "1" if frozen else "0"
            return (
                f"echo {value} >{where}/cgroup.freeze && "
                f"until grep -qx 'frozen {value}' {where}/cgroup.events; do {_POLL}; done"
            )
        state = "FROZEN" if frozen else "THAWED"
        return (
            f"echo {state} >{where}/freezer.state && "
            f'until [ "$(cat {where}/freezer.state)" = {state} ]; do {_POLL}; done'
        )

    def quota_script(self, quota_us: int | None, period_us: int) -> str | None:
        """Set our parent cgroup's CFS quota and print it back as ``quota period``."""
        if self.cpu is None:
            return None
        where = shlex.quote(self.cpu)
        if self.version == 2:
            return f"echo {quota_us or 'max'} {period_us} >{where}/cpu.max && cat {where}/cpu.max"
        # Lift the quota first: a new period shorter than the old quota would be refused.
        return (
            f"echo -1 >{where}/cpu.cfs_quota_us && "
            f"echo {period_us} >{where}/cpu.cfs_period_us && "
            f"echo {-1 if quota_us is None else quota_us} >{where}/cpu.cfs_quota_us && "
            f'echo "$(cat {where}/cpu.cfs_quota_us) $(cat {where}/cpu.cfs_period_us)"'
        )

    def cleanup_script(self) -> str:
        """Thaw, uncap and remove our cgroups (a cgroup still holding a process stays)."""
        steps = [s for s in (self.freeze_script(False), self.quota_script(None, 100_000)) if s]
        for parent in dict.fromkeys(p for p in (self.freezer, self.cpu) if p):
            where = shlex.quote(parent)
            steps.append(f"if [ -d {where} ]; then rmdir {where}/*/ {where}; fi")
        return "; ".join(f"{{ {step}; }} >/dev/null 2>&1" for step in steps) or "true"


def parse_probe(output: str) -> CgroupLayout:
    """The layout from :data:`PROBE`'s output: v1 when a writable v1 freezer is mounted, else
    v2 when the unified tree has controllers, else none."""
    v1: dict[str, str] = {}
    v2_mount: str | None = None
    v2_controllers: set[str] = set()
    for line in output.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "cgroup":
            options = fields[2].split(",")
            if "rw" in options:
                for controller in ("freezer", "cpu"):
                    if controller in options:
                        v1.setdefault(controller, fields[1])
        elif len(fields) >= 2 and fields[0] == "controllers":
            controllers = set(fields[2].split(",")) if len(fields) > 2 else set()
            if controllers:
                v2_mount, v2_controllers = fields[1], controllers
    if "freezer" in v1:
        cpu = v1.get("cpu")
        return CgroupLayout(1, f"{v1['freezer']}/{GROUP}", f"{cpu}/{GROUP}" if cpu else None)
    if v2_mount is not None:
        group = f"{v2_mount}/{GROUP}"
        return CgroupLayout(2, group, group if "cpu" in v2_controllers else None, v2_mount)
    return CgroupLayout(0, None, None)
