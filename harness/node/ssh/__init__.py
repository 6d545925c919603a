"""The SSH backend: real hosts listed in a hosts file, reached with paramiko.

:class:`SshNode` implements :class:`harness.node.Node` and the optional capabilities;
:class:`SshCluster` connects a hosts file's hosts for a run and leaves them clean;
:func:`load_hosts` reads the hosts file; :func:`check_hosts` is the doctor for real hosts.
"""

from harness.node.ssh.cluster import SshCluster, clean_node, connect, heal_node, on_hosts
from harness.node.ssh.doctor import HostCheck, check_hosts
from harness.node.ssh.hosts import HostsError, HostsFile, HostSpec, load_hosts
from harness.node.ssh.node import SshNode, exempt_control

__all__ = [
    "HostCheck",
    "HostSpec",
    "HostsError",
    "HostsFile",
    "SshCluster",
    "SshNode",
    "check_hosts",
    "clean_node",
    "connect",
    "exempt_control",
    "heal_node",
    "load_hosts",
    "on_hosts",
]
