"""Which failed writes waiting can heal, and which it cannot.

A full disk, a quota, a failing or read-only device: the same write may work once
someone has made room or fixed the disk, so the work waits and tries again. Any
other error (a name the file system refuses, an invalid argument) fails the same
way every time: retrying it only repeats the failure, so the work that met it
must end with an error its owner is told of, and what comes after it goes on.
"""

from __future__ import annotations

import errno

HEALING_ERRNOS = frozenset(
    {
        errno.ENOSPC,  # no space left
        errno.EDQUOT,  # over quota
        errno.EIO,  # the device failed
        errno.EROFS,  # remounted read-only after an error
        errno.ENOMEM,
        errno.EMFILE,  # too many open files, in this process
        errno.ENFILE,  # ... or in the system
        errno.EAGAIN,
        errno.EINTR,
    }
)


def heals_by_waiting(error: OSError) -> bool:
    return error.errno in HEALING_ERRNOS
