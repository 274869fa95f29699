"""Device nodes: /dev/nvidiactl, /dev/nvidia-uvm and at least one /dev/nvidiaN, each a character
device this process can open for reading and writing."""
from __future__ import annotations

import errno
import os
import re
import stat

from contract.verdict import Result, failed, passed

NAME = "devices"
REQUIRED = ("nvidiactl", "nvidia-uvm")
GPU_NODE = re.compile(r"nvidia\d+")
PASS_NODES = ("pass /dev/nvidia0..N, /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia-uvm-tools as devices "
              "(compose `devices:`, podman `AddDevice=`), or use the NVIDIA container toolkit")
OPEN_FIXES = {
    errno.EPERM: "the container may not use this device: pass it as a device (--device / `devices:`), "
                 "a bind mount is not enough",
    errno.EACCES: "give the container user access (the device's group, e.g. --group-add video, or run as root)",
    errno.ENXIO: "the host's nvidia kernel module is not loaded: load it on the host (nvidia-smi there must work)",
    errno.ENODEV: "the host's nvidia kernel module is not loaded: load it on the host (nvidia-smi there must work)",
}


def node_problem(path: str) -> tuple[str, str] | None:
    """(finding, fix) for a node that is missing, not a character device or cannot be opened read-write."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path} is missing", PASS_NODES
    if not stat.S_ISCHR(mode):
        return f"{path} is not a character device", PASS_NODES
    try:
        os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))
    except OSError as error:
        fix = OPEN_FIXES.get(error.errno, "check the device's permissions and the host driver")
        return f"{path} cannot be opened read-write ({error.strerror})", fix
    return None


def check_devices(dev_dir: str = "/dev") -> Result:
    try:
        gpus = sorted(name for name in os.listdir(dev_dir) if GPU_NODE.fullmatch(name))
    except OSError:
        gpus = []
    if not gpus:
        return failed(NAME, f"no {dev_dir}/nvidiaN GPU node", PASS_NODES)
    for name in (*REQUIRED, *gpus):
        problem = node_problem(os.path.join(dev_dir, name))
        if problem:
            return failed(NAME, *problem)
    return passed(NAME, f"{', '.join(gpus)}, {', '.join(REQUIRED)} open read-write")
