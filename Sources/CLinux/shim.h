#ifndef SMART_BFF_CLINUX_SHIM_H
#define SMART_BFF_CLINUX_SHIM_H
/* Linux and GNU APIs that Glibc's Swift module does not export. No _GNU_SOURCE here: it
   would change shared glibc definitions (fd_set) and clash with Glibc's module. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <spawn.h>

/* accept4 is declared only under _GNU_SOURCE; declare it ourselves. */
struct sockaddr;
extern int accept4(int fd, struct sockaddr *addr, unsigned int *addrlen, int flags);
static inline int bff_accept4(int fd, int flags) { return accept4(fd, (struct sockaddr *)0, (unsigned int *)0, flags); }

/* glibc 2.34+: the child closes every descriptor from `from` on. Not in Glibc's module. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
static inline int bff_spawn_close_from(posix_spawn_file_actions_t *actions, int from) { return posix_spawn_file_actions_addclosefrom_np(actions, from); }
/* The child starts with no signal blocked and SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGPIPE at
   their default action, whatever the spawning thread blocks or this process ignores (a Dispatch
   worker thread blocks them; SIGPIPE is ignored here); with `new_session`, in a session of its own
   (glibc 2.26+'s POSIX_SPAWN_SETSID, a GNU flag), out of reach of the terminal's signals and of
   a kill of our process group. */
#include <signal.h>
static inline int bff_spawnattr_set_clean_start(posix_spawnattr_t *attr, int new_session) {
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM); sigaddset(&defaults, SIGINT); sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGQUIT); sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(attr, &none);
    posix_spawnattr_setsigdefault(attr, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (new_session) flags |= 0x80;
    return posix_spawnattr_setflags(attr, flags);
}
/* The calling thread's name as `top -H` and /proc show it (at most 15 bytes); prctl is
   variadic, which Swift cannot call. */
#include <sys/prctl.h>
static inline void bff_set_thread_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
/* memmem (glibc's two-way search) is declared only under _GNU_SOURCE. */
#include <stddef.h>
extern void *memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen);
static inline void *bff_memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen) {
    return memmem(haystack, haystacklen, needle, needlelen);
}
#endif
