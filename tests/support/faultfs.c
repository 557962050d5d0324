/* faultfs: an LD_PRELOAD shim that makes a real process's storage fail, for tests.

   Calls on files under FAULTFS_PREFIX fail while a flag file exists in the FAULTFS_CONTROL
   directory, so a test turns a fault on and off while the process runs:

     CONTROL/fsync   fsync and fdatasync fail with EIO (the data written stays in the page cache,
                     as on Linux after a failed writeback; the test drops it, see FAULTFS_LOG)
     CONTROL/write   write, pwrite, writev and pwritev fail with ENOSPC (a full disk)

   FAULTFS_LOG, if set, gets one line per fsync or fdatasync of a file under the prefix:
   "ok SIZE PATH" or "fail SIZE PATH", SIZE being the file's size at that moment. A test that kills
   the process can then cut each file whose fsync failed back to the size its last successful fsync
   covered: what a power cut after a failed writeback leaves (PostgreSQL's "fsyncgate").

   The real calls are reached through dlsym(RTLD_NEXT); the log is written with the raw syscall so
   the shim never calls itself. Nothing here is used outside the tests. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int flag_on(const char *name) {
    const char *control = getenv("FAULTFS_CONTROL");
    if (control == NULL) return 0;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", control, name) >= (int)sizeof path) return 0;
    return syscall(SYS_faccessat, AT_FDCWD, path, F_OK, 0) == 0;
}

/* The fd's path if it is under FAULTFS_PREFIX (into `out`), else 0. */
static int under_prefix(int fd, char *out, size_t size) {
    const char *prefix = getenv("FAULTFS_PREFIX");
    if (prefix == NULL || prefix[0] == '\0') return 0;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, out, size - 1);
    if (n <= 0) return 0;
    out[n] = '\0';
    size_t len = strlen(prefix);
    return strncmp(out, prefix, len) == 0 && (out[len] == '/' || out[len] == '\0');
}

static void log_sync(int fd, const char *path, int ok) {
    const char *target = getenv("FAULTFS_LOG");
    if (target == NULL) return;
    struct stat st;
    long long size = syscall(SYS_fstat, fd, &st) == 0 ? (long long)st.st_size : -1;
    char line[PATH_MAX + 64];
    int n = snprintf(line, sizeof line, "%s %lld %s\n", ok ? "ok" : "fail", size, path);
    if (n <= 0 || n >= (int)sizeof line) return;
    int out = syscall(SYS_openat, AT_FDCWD, target, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (out < 0) return;
    syscall(SYS_write, out, line, (size_t)n);
    syscall(SYS_close, out);
}

static int sync_call(int fd, const char *name) {
    char path[PATH_MAX];
    int watched = under_prefix(fd, path, sizeof path);
    if (watched && flag_on("fsync")) {
        log_sync(fd, path, 0);
        errno = EIO;
        return -1;
    }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    int result = real(fd);
    if (watched && result == 0) log_sync(fd, path, 1);
    return result;
}

int fsync(int fd) { return sync_call(fd, "fsync"); }
int fdatasync(int fd) { return sync_call(fd, "fdatasync"); }

static int write_fails(int fd) {
    if (!flag_on("write")) return 0;
    char path[PATH_MAX];
    if (!under_prefix(fd, path, sizeof path)) return 0;
    errno = ENOSPC;
    return 1;
}

ssize_t write(int fd, const void *buf, size_t count) {
    if (write_fails(fd)) return -1;
    static ssize_t (*real)(int, const void *, size_t);
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    if (write_fails(fd)) return -1;
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    if (write_fails(fd)) return -1;
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    return real(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    if (write_fails(fd)) return -1;
    static ssize_t (*real)(int, const struct iovec *, int);
    if (real == NULL) real = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    return real(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    if (write_fails(fd)) return -1;
    static ssize_t (*real)(int, const struct iovec *, int, off_t);
    if (real == NULL) real = (ssize_t (*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    return real(fd, iov, iovcnt, offset);
}
