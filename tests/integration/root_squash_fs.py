#!/usr/bin/python3
"""Mounts SOURCE at MOUNTPOINT as NFS does with root_squash: every request is served with
the caller's file-system ids, those of root as nobody's, so root may read only what
others may (the kernel leaves permissions to this daemon: no default_permissions).
Each request made as root is appended to LOG ("<operation> <path>"; not the kernel's
own release of a closed file, which carries no caller).

Usage (as root): root_squash_fs.py SOURCE MOUNTPOINT LOG; stays in the foreground.
"""
import ctypes
import errno
import os
import sys

from fusepy import FUSE, FuseOSError, Operations, fuse_get_context

NOBODY = 65534
libc = ctypes.CDLL(None, use_errno=True)


class RootSquash(Operations):
    def __init__(self, source, log):
        self.source = source
        self.log = log

    def _path(self, path):
        return self.source + path

    def __call__(self, op, path, *args):
        uid, gid, _ = fuse_get_context()
        # The kernel sends release and releasedir on the last close, with no caller.
        if uid == 0 and op not in ("init", "destroy", "release", "releasedir"):
            with open(self.log, "a") as f:
                f.write(f"{op} {path}\n")
        # One thread (nothreads): the ids are this thread's, set for each request.
        libc.setfsgid(NOBODY if gid == 0 else gid)
        libc.setfsuid(NOBODY if uid == 0 else uid)
        try:
            return super().__call__(op, self._path(path), *args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO)
        finally:
            libc.setfsuid(0)
            libc.setfsgid(0)

    def getattr(self, path, fh=None):
        st = os.lstat(path)
        return {k: getattr(st, k) for k in (
            "st_mode", "st_uid", "st_gid", "st_size", "st_nlink", "st_atime", "st_mtime",
            "st_ctime")}

    def access(self, path, mode):
        os.lstat(path)  # as the caller: only where it may look

    def opendir(self, path):
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
        return 0

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(path)

    def readlink(self, path):
        return os.readlink(path)

    def mkdir(self, path, mode):
        os.mkdir(path, mode)

    def rmdir(self, path):
        os.rmdir(path)

    def unlink(self, path):
        os.unlink(path)

    def symlink(self, target, source):
        os.symlink(source, target)

    def rename(self, old, new):
        os.rename(old, self._path(new))

    def chmod(self, path, mode):
        os.chmod(path, mode)

    def chown(self, path, uid, gid):
        os.lchown(path, uid, gid)

    def truncate(self, path, length, fh=None):
        os.truncate(path, length)

    def utimens(self, path, times=None):
        os.utime(path, times, follow_symlinks=False)

    def open(self, path, flags):
        return os.open(path, flags)

    def create(self, path, mode, fi=None):
        return os.open(path, os.O_RDWR | os.O_CREAT, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        os.fsync(fh)

    def release(self, path, fh):
        os.close(fh)

    def statfs(self, path):
        st = os.statvfs(path)
        return {k: getattr(st, k) for k in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}


if __name__ == "__main__":
    source, mountpoint, log = sys.argv[1:4]
    FUSE(RootSquash(os.path.abspath(source), os.path.abspath(log)), mountpoint,
         foreground=True, nothreads=True, allow_other=True)
