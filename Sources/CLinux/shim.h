#ifndef SMART_BFF_CLINUX_SHIM_H
#define SMART_BFF_CLINUX_SHIM_H
/* Linux event APIs that Glibc's Swift module does not export. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

/* accept4 is declared only under _GNU_SOURCE, which Glibc's module map does not set. */
static inline int bff_accept4(int fd, int flags) { return accept4(fd, (void *)0, (void *)0, flags); }
#endif
