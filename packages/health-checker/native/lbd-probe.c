/*
 * lbd-probe: tcp connect checks, many at once, for the agent's health checker (probers/native-connect.ts).
 *
 * stdin, one request a line:
 *   P <slot> <gen> <address> <port> <timeout ms>   connect to address:port (IPv4 or IPv6 literal)
 *   C <slot> <gen>                                  forget that probe: close it (with a reset), no answer
 * stdout, one answer a line, for every P not cancelled:
 *   <slot> <gen> <code>     OK (the handshake completed), TIMEOUT (not within the timeout), or the
 *                           connect's errno by name (ECONNREFUSED, EHOSTUNREACH, ...; E<number> otherwise)
 *
 * Every socket is closed with a reset (SO_LINGER 0), never a FIN: a probe leaves no TIME_WAIT, and the
 * director's conntrack keeps a reset connection 10 s rather than 120 (as the Node prober does; tcp.ts).
 * A slot is the agent's handle; gen tells a slot's probes apart, so a late answer for a cancelled probe
 * is recognised as such.
 *
 * Why: at 5 000 probes a second, the Node prober's sockets, streams and promises cost the agent more than
 * the connects themselves (docs/kernel-io.md has the figures). Here a probe is a socket, an epoll
 * registration and two short lines. libc only. It exits at EOF on stdin, so it never outlives the agent.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS (1u << 20)

struct probe { int fd; uint32_t gen; int64_t deadline_ms; };
static struct probe *probes;
static uint32_t nslots;
static int ep;
static int64_t next_deadline = INT64_MAX;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *errno_name(int e) {
  switch (e) {
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENETUNREACH: return "ENETUNREACH";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case EINVAL: return "EINVAL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    default: {
      static char buf[24];
      snprintf(buf, sizeof buf, "E%d", e);
      return buf;
    }
  }
}

static void answer(uint32_t slot, uint32_t gen, const char *code) {
  printf("%u %u %s\n", slot, gen, code);
}

/* Closes a probe's socket with a reset and frees its slot. */
static void finish(uint32_t slot) {
  struct probe *p = &probes[slot];
  if (p->fd < 0) return;
  struct linger lg = { .l_onoff = 1, .l_linger = 0 };
  setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(p->fd); /* also leaves the epoll set */
  p->fd = -1;
}

static int grow(uint32_t slot) {
  if (slot < nslots) return 1;
  if (slot >= MAX_SLOTS) return 0;
  uint32_t n = nslots ? nslots : 1024;
  while (n <= slot) n *= 2;
  struct probe *q = realloc(probes, n * sizeof *q);
  if (!q) return 0;
  for (uint32_t i = nslots; i < n; i++) q[i].fd = -1;
  probes = q;
  nslots = n;
  return 1;
}

static void start(uint32_t slot, uint32_t gen, const char *address, unsigned port, unsigned timeout_ms) {
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    len = sizeof *v6;
  } else {
    answer(slot, gen, "EINVAL");
    return;
  }
  if (!grow(slot)) { answer(slot, gen, "ENOBUFS"); return; }
  finish(slot); /* a slot reused before its cancel arrived: the agent has forgotten the old probe */
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { answer(slot, gen, errno_name(errno)); return; }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&ss, len) == 0) {
    probes[slot] = (struct probe){ .fd = fd, .gen = gen };
    answer(slot, gen, "OK");
    finish(slot);
    return;
  }
  if (errno != EINPROGRESS) {
    int e = errno;
    probes[slot] = (struct probe){ .fd = fd, .gen = gen };
    answer(slot, gen, errno_name(e));
    finish(slot);
    return;
  }
  /* The event names slot and gen: a slot reused while an event for its old socket is pending is not confused. */
  struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = ((uint64_t)gen << 32) | slot };
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    int e = errno;
    close(fd);
    answer(slot, gen, errno_name(e));
    return;
  }
  int64_t deadline = now_ms() + timeout_ms;
  probes[slot] = (struct probe){ .fd = fd, .gen = gen, .deadline_ms = deadline };
  if (deadline < next_deadline) next_deadline = deadline;
}

/* The requests in buf[0, n); returns how many bytes were whole lines. */
static size_t requests(char *buf, size_t n) {
  size_t used = 0;
  for (;;) {
    char *nl = memchr(buf + used, '\n', n - used);
    if (!nl) return used;
    *nl = '\0';
    char *line = buf + used;
    used = (size_t)(nl - buf) + 1;
    unsigned slot, gen, port, timeout;
    char address[64];
    if (sscanf(line, "P %u %u %63s %u %u", &slot, &gen, address, &port, &timeout) == 5 && port <= 65535) {
      start(slot, gen, address, port, timeout);
    } else if (sscanf(line, "C %u %u", &slot, &gen) == 2) {
      if (slot < nslots && probes[slot].fd >= 0 && probes[slot].gen == gen) finish(slot);
    } else {
      fprintf(stderr, "lbd-probe: not a request: %.200s\n", line);
    }
  }
}

/* Probes past their deadline answer TIMEOUT; the next deadline is found on the way. */
static void expire(int64_t now) {
  int64_t next = INT64_MAX;
  for (uint32_t i = 0; i < nslots; i++) {
    if (probes[i].fd < 0) continue;
    if (probes[i].deadline_ms <= now) {
      answer(i, probes[i].gen, "TIMEOUT");
      finish(i);
    } else if (probes[i].deadline_ms < next) {
      next = probes[i].deadline_ms;
    }
  }
  next_deadline = next;
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc != 1) { fprintf(stderr, "usage: lbd-probe < REQUESTS\n"); return 2; }
  static char out[1 << 16];
  setvbuf(stdout, out, _IOFBF, sizeof out);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) { perror("lbd-probe: epoll"); return 1; }
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  struct epoll_event in = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
  if (epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in) < 0) { perror("lbd-probe: epoll stdin"); return 1; }
  static char buf[1 << 16];
  size_t have = 0;
  struct epoll_event evs[256];
  for (;;) {
    int wait = -1;
    if (next_deadline != INT64_MAX) {
      int64_t d = next_deadline - now_ms();
      wait = d < 0 ? 0 : d > 1000 ? 1000 : (int)d;
    }
    int n = epoll_wait(ep, evs, 256, wait);
    if (n < 0 && errno != EINTR) { perror("lbd-probe: epoll_wait"); return 1; }
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u64 == UINT64_MAX) {
        for (;;) {
          ssize_t got = read(0, buf + have, sizeof buf - have);
          if (got == 0) { fflush(stdout); return 0; }
          if (got < 0) {
            if (errno == EAGAIN || errno == EINTR) break;
            perror("lbd-probe: read");
            return 1;
          }
          have += (size_t)got;
          size_t used = requests(buf, have);
          memmove(buf, buf + used, have - used);
          have -= used;
          if (have == sizeof buf) { fprintf(stderr, "lbd-probe: a request line longer than %zu bytes\n", sizeof buf); return 2; }
        }
        continue;
      }
      uint32_t slot = (uint32_t)evs[i].data.u64, gen = (uint32_t)(evs[i].data.u64 >> 32);
      if (slot >= nslots || probes[slot].fd < 0 || probes[slot].gen != gen) continue;
      int err = 0;
      socklen_t el = sizeof err;
      getsockopt(probes[slot].fd, SOL_SOCKET, SO_ERROR, &err, &el);
      answer(slot, probes[slot].gen, err == 0 ? "OK" : errno_name(err));
      finish(slot);
    }
    if (next_deadline <= now_ms()) expire(now_ms());
    if (fflush(stdout) != 0) return 0; /* the agent is gone */
  }
}
