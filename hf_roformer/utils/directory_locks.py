"""Whether a directory is still being written: its writer holds a lock on it (an exclusive `flock`, which the system
releases when the process ends, however it ends), and its writer's process is alive on this machine (a zombie, killed
and not yet reaped by its parent, is not). Used to tell the staging directories of a killed conversion from those of
a running one."""

import errno
import os
from pathlib import Path


try:
    import fcntl
except ImportError:  # Windows: a directory's writer is told by its process id alone
    fcntl = None


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine: a zombie (killed, not yet reaped by its parent, so its id
    still answers) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not is_zombie(pid)


def is_zombie(pid: int) -> bool:
    """Whether process `pid` has ended and waits to be reaped: psutil where it is installed (it comes with the
    `training` extra), else Linux's /proc; False where neither can tell."""
    try:
        import psutil
    except ImportError:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            return False
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def hold(directory: Path) -> int | None:
    """Lock `directory` for this process (an exclusive `flock` on it, released when the process ends however it ends)
    and return the descriptor to close when done; None where the system has no such lock. Written by hand because
    `filelock` locks files: locking the directory itself adds nothing beside or inside the output."""
    if fcntl is None:
        return None
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return None
    return descriptor


def release(descriptor: int | None) -> None:
    """Give up a lock `hold` took."""
    if descriptor is not None:
        os.close(descriptor)


def held_elsewhere(directory: Path) -> bool | None:
    """Whether a live process holds `directory` (True/False), or None where the lock cannot tell (no `flock`, or a file
    system that refuses it)."""
    if fcntl is None:
        return None
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        return True if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
    finally:
        os.close(descriptor)
    return False


__all__ = ["held_elsewhere", "hold", "is_zombie", "process_alive", "release"]
