/*
 * lbd-ctnl: the kernel's conntrack events for connection sync, read from ctnetlink in C.
 *
 * `lbd-ctnl events BYTES` is the compiled form of ctnetlink.ts's `perl -e CTNL_SCRIPT events BYTES` and
 * speaks the same protocol on stdout (ctnetlink.ts documents it; parseEventLine reads both):
 *
 *   R <rcvbuf>               the subscription is live (SO_RCVBUF as the kernel set it)
 *   L ENOBUFS                the kernel dropped events (one line per failed read)
 *   <N|U|D> <injected 0|1> <tcp|udp> <orig src> <orig sport> <orig dst> <orig dport>
 *           <reply src> <reply sport> <reply dst> <reply dport> <state|-> <timeout s> <mark>
 *
 * Why C: the perl reader decoded every update of every connection at about 0.4 of a core at the connsync
 * benchmark's load (docs/kernel-io.md has the figures). It uses libc only (no libmnl or
 * libnetfilter_conntrack to install), so the Debian package depends on nothing new.
 *
 * Only what sync can use is printed: TCP and UDP entries with a mark (lbd's own connections), and the
 * watch's probe (udp 127.0.0.1 -> 127.0.0.1:9, mark 0). It exits at EOF on stdin, so it never outlives the
 * agent, and when stdout is gone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif

enum { NFNL_SUBSYS_CTNETLINK = 1, IPCTNL_MSG_CT_NEW = 0, IPCTNL_MSG_CT_GET = 1, IPCTNL_MSG_CT_DELETE = 2 };
enum { CTA_TUPLE_ORIG = 1, CTA_TUPLE_REPLY = 2, CTA_STATUS = 3, CTA_PROTOINFO = 4, CTA_TIMEOUT = 7, CTA_MARK = 8, CTA_MAX_USED = 8 };
enum { CTA_TUPLE_IP = 1, CTA_TUPLE_PROTO = 2 };
enum { CTA_IP_V4_SRC = 1, CTA_IP_V4_DST = 2, CTA_IP_V6_SRC = 3, CTA_IP_V6_DST = 4 };
enum { CTA_PROTO_NUM = 1, CTA_PROTO_SRC_PORT = 2, CTA_PROTO_DST_PORT = 3 };
enum { CTA_PROTOINFO_TCP = 1, CTA_PROTOINFO_TCP_STATE = 1 };
enum { IPS_SEEN_REPLY = 2, IPS_ASSURED = 4 };
/* NFNLGRP_CONNTRACK_NEW | UPDATE | DESTROY */
#define EVENT_GROUPS 7u

static const char *const TCP_STATES[] = { "NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "LISTEN" };

/* An attribute's payload, or NULL (len 0) when absent. */
struct attr { const uint8_t *p; size_t len; };

/* The attributes of [p, p + n) by type (nested flag stripped), up to `max`. */
static void attrs(const uint8_t *p, size_t n, struct attr *out, unsigned max) {
  memset(out, 0, sizeof(*out) * (max + 1));
  size_t o = 0;
  while (o + 4 <= n) {
    uint16_t l, t;
    memcpy(&l, p + o, 2);
    memcpy(&t, p + o + 2, 2);
    if (l < 4 || o + l > n) break;
    t &= 0x3fff;
    if (t <= max) { out[t].p = p + o + 4; out[t].len = l - 4u; }
    o += (l + 3u) & ~3u;
  }
}

static uint32_t be32(const struct attr *a) { uint32_t v; memcpy(&v, a->p, 4); return ntohl(v); }
static uint16_t be16(const struct attr *a) { uint16_t v; memcpy(&v, a->p, 2); return ntohs(v); }

struct tuple { uint8_t proto; char src[INET6_ADDRSTRLEN]; char dst[INET6_ADDRSTRLEN]; unsigned sport, dport; };

/* A CTA_TUPLE_* attribute; 0 when it lacks addresses or a protocol. */
static int tuple(const struct attr *a, struct tuple *t) {
  if (a->p == NULL) return 0;
  struct attr top[3], ip[5], proto[4];
  attrs(a->p, a->len, top, 2);
  if (top[CTA_TUPLE_IP].p == NULL || top[CTA_TUPLE_PROTO].p == NULL) return 0;
  attrs(top[CTA_TUPLE_IP].p, top[CTA_TUPLE_IP].len, ip, 4);
  attrs(top[CTA_TUPLE_PROTO].p, top[CTA_TUPLE_PROTO].len, proto, 3);
  if (proto[CTA_PROTO_NUM].len < 1) return 0;
  t->proto = proto[CTA_PROTO_NUM].p[0];
  t->sport = proto[CTA_PROTO_SRC_PORT].len >= 2 ? be16(&proto[CTA_PROTO_SRC_PORT]) : 0;
  t->dport = proto[CTA_PROTO_DST_PORT].len >= 2 ? be16(&proto[CTA_PROTO_DST_PORT]) : 0;
  if (ip[CTA_IP_V4_SRC].len == 4 && ip[CTA_IP_V4_DST].len == 4) {
    inet_ntop(AF_INET, ip[CTA_IP_V4_SRC].p, t->src, sizeof t->src);
    inet_ntop(AF_INET, ip[CTA_IP_V4_DST].p, t->dst, sizeof t->dst);
    return 1;
  }
  if (ip[CTA_IP_V6_SRC].len == 16 && ip[CTA_IP_V6_DST].len == 16) {
    inet_ntop(AF_INET6, ip[CTA_IP_V6_SRC].p, t->src, sizeof t->src);
    inet_ntop(AF_INET6, ip[CTA_IP_V6_DST].p, t->dst, sizeof t->dst);
    return 1;
  }
  return 0;
}

/* Output, written once per burst of reads. */
static char *out_buf;
static size_t out_len, out_cap;

static void out_flush(void) {
  size_t o = 0;
  while (o < out_len) {
    ssize_t w = write(STDOUT_FILENO, out_buf + o, out_len - o);
    if (w < 0) {
      if (errno == EINTR) continue;
      exit(0); /* the agent is gone */
    }
    o += (size_t)w;
  }
  out_len = 0;
}

static void out_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out_line(const char *fmt, ...) {
  if (out_cap - out_len < 512) {
    out_cap = out_cap ? out_cap * 2 : 1 << 20;
    out_buf = realloc(out_buf, out_cap);
    if (out_buf == NULL) { perror("realloc"); exit(1); }
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out_buf + out_len, out_cap - out_len, fmt, ap);
  va_end(ap);
  if (n > 0) out_len += (size_t)n;
}

/* One ctnetlink message (after its nlmsghdr) as an event line, when sync can use it. */
static void event(const struct nlmsghdr *h) {
  unsigned msg = h->nlmsg_type & 0xff;
  if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_CTNETLINK || msg == IPCTNL_MSG_CT_GET) return;
  if (h->nlmsg_len < NLMSG_HDRLEN + 4) return;
  struct attr a[CTA_MAX_USED + 1];
  attrs((const uint8_t *)h + NLMSG_HDRLEN + 4, h->nlmsg_len - NLMSG_HDRLEN - 4, a, CTA_MAX_USED);
  uint32_t mark = a[CTA_MARK].len >= 4 ? be32(&a[CTA_MARK]) : 0;
  struct tuple o, r;
  if (!tuple(&a[CTA_TUPLE_ORIG], &o) || (o.proto != 6 && o.proto != 17)) return;
  if (mark == 0 && !(o.proto == 17 && strcmp(o.src, "127.0.0.1") == 0 && strcmp(o.dst, "127.0.0.1") == 0 && o.dport == 9)) return;
  if (!tuple(&a[CTA_TUPLE_REPLY], &r)) return;
  uint32_t status = a[CTA_STATUS].len >= 4 ? be32(&a[CTA_STATUS]) : 0;
  const char *state = "-";
  if (o.proto == 17) {
    state = !(status & IPS_SEEN_REPLY) ? "UNREPLIED" : (status & IPS_ASSURED) ? "ASSURED" : "REPLIED";
  } else if (a[CTA_PROTOINFO].p != NULL) {
    struct attr pi[2], tcp[2];
    attrs(a[CTA_PROTOINFO].p, a[CTA_PROTOINFO].len, pi, 1);
    if (pi[CTA_PROTOINFO_TCP].p != NULL) {
      attrs(pi[CTA_PROTOINFO_TCP].p, pi[CTA_PROTOINFO_TCP].len, tcp, 1);
      if (tcp[CTA_PROTOINFO_TCP_STATE].len >= 1 && tcp[CTA_PROTOINFO_TCP_STATE].p[0] < sizeof TCP_STATES / sizeof TCP_STATES[0]) {
        state = TCP_STATES[tcp[CTA_PROTOINFO_TCP_STATE].p[0]];
      }
    }
  }
  char kind = msg == IPCTNL_MSG_CT_DELETE ? 'D' : (h->nlmsg_flags & NLM_F_CREATE) ? 'N' : 'U';
  uint32_t timeout = a[CTA_TIMEOUT].len >= 4 ? be32(&a[CTA_TIMEOUT]) : 0;
  out_line("%c %d %s %s %u %s %u %s %u %s %u %s %u %u\n", kind, h->nlmsg_pid != 0, o.proto == 6 ? "tcp" : "udp",
           o.src, o.sport, o.dst, o.dport, r.src, r.sport, r.dst, r.dport, state, timeout, mark);
}

/*
 * The kernel's part of the filtering (SO_ATTACH_FILTER, classic BPF run on each event before it is queued
 * to this socket): TCP updates into FIN_WAIT, CLOSE_WAIT or LAST_ACK are dropped there. Sync has no use for
 * them: a copied connection's copy changes only when its binding does, and a closing one is removed at
 * TIME_WAIT or CLOSE, which pass (a closing connection goes through one or more of the three). Everything else
 * passes, and anything the program cannot read with certainty (another subsystem, a message shaped
 * otherwise, an attribute of 256 bytes or more) passes too, for userspace to judge.
 *
 * The walk: ctnetlink puts CTA_PROTOINFO after the two tuples and a few fixed attributes (zone, id, status,
 * timeout), so the top-level attributes are hopped over, at most PROTOINFO_HOPS of them, to find it; inside,
 * CTA_PROTOINFO_TCP and its first attribute CTA_PROTOINFO_TCP_STATE (tcp_to_nlattr puts it first). Netlink
 * is host-endian and BPF's half and word loads are big-endian, so only bytes are loaded (x86 and arm64 are
 * little-endian: an attribute's length and type start with their low byte).
 */
#define PROTOINFO_HOPS 8
#define ACCEPT_ALL 0xffffffffu

/* 9 to start, 15 a hop, 13 to end (jump offsets are 8 bits: the program must stay under 255 instructions). */
static struct sock_filter filter_prog[9 + PROTOINFO_HOPS * 15 + 13];

static unsigned build_filter(void) {
  unsigned n = 0;
  /* Sized above: an instruction past the end is a bug in this function, stopped before it writes. */
#define SLOT() (n < sizeof filter_prog / sizeof filter_prog[0] ? &filter_prog[n++] : (abort(), filter_prog))
#define OP(code, k) (*SLOT() = (struct sock_filter)BPF_STMT(code, k))
#define JMP(code, k, jt, jf) (*SLOT() = (struct sock_filter)BPF_JUMP(code, k, jt, jf))
  /* Jumps to the accept or drop at the end are patched once the program's length is known. */
  unsigned to_accept[PROTOINFO_HOPS * 4 + 8], to_drop[4], na = 0, nd = 0;
#define JMP_ACCEPT_IF_NOT(code, k) (to_accept[na++] = n, JMP(code, k, 0, 0))
  OP(BPF_LD | BPF_W | BPF_LEN, 0);
  OP(BPF_ALU | BPF_SUB | BPF_K, 4);
  OP(BPF_ST, 0);                                   /* M[0] = len - 4: an attribute header at X is readable if X <= M[0] */
  OP(BPF_LD | BPF_W | BPF_LEN, 0);
  OP(BPF_ALU | BPF_SUB | BPF_K, 13);
  OP(BPF_ST, 3);                                   /* M[3] = len - 13: the TCP state byte at X + 12 is readable if X <= M[3] */
  OP(BPF_LD | BPF_B | BPF_ABS, 5);                 /* nlmsg_type's high byte: the subsystem */
  JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JEQ | BPF_K, NFNL_SUBSYS_CTNETLINK);
  OP(BPF_LDX | BPF_W | BPF_IMM, NLMSG_HDRLEN + 4);  /* X: the first attribute, after nfgenmsg */
  unsigned found[PROTOINFO_HOPS];
  for (unsigned h = 0; h < PROTOINFO_HOPS; h++) {
    OP(BPF_LD | BPF_MEM, 0);
    JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JGE | BPF_X, 0);   /* no attribute left: no protoinfo */
    OP(BPF_LD | BPF_B | BPF_IND, 1);
    JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JEQ | BPF_K, 0);   /* 256 bytes or more: not walked */
    OP(BPF_LD | BPF_B | BPF_IND, 2);
    found[h] = n;
    JMP(BPF_JMP | BPF_JEQ | BPF_K, CTA_PROTOINFO, 0, 0);  /* patched: to the protoinfo check */
    OP(BPF_LD | BPF_B | BPF_IND, 0);
    JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JGE | BPF_K, 4);   /* a malformed length */
    OP(BPF_ALU | BPF_ADD | BPF_K, 3);
    OP(BPF_ALU | BPF_AND | BPF_K, 0xfc);
    OP(BPF_ST, 1);
    OP(BPF_MISC | BPF_TXA, 0);
    OP(BPF_LDX | BPF_MEM, 1);
    OP(BPF_ALU | BPF_ADD | BPF_X, 0);
    OP(BPF_MISC | BPF_TAX, 0);
  }
  to_accept[na++] = n;
  JMP(BPF_JMP | BPF_JA, 0, 0, 0);                  /* not found within the hops */
  unsigned protoinfo = n;
  for (unsigned h = 0; h < PROTOINFO_HOPS; h++) filter_prog[found[h]].jt = (uint8_t)(protoinfo - found[h] - 1);
  OP(BPF_LD | BPF_MEM, 3);
  JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JGE | BPF_X, 0);
  OP(BPF_LD | BPF_B | BPF_IND, 6);                 /* the nested attribute: CTA_PROTOINFO_TCP */
  JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JEQ | BPF_K, CTA_PROTOINFO_TCP);
  OP(BPF_LD | BPF_B | BPF_IND, 10);                /* its first: CTA_PROTOINFO_TCP_STATE */
  JMP_ACCEPT_IF_NOT(BPF_JMP | BPF_JEQ | BPF_K, CTA_PROTOINFO_TCP_STATE);
  OP(BPF_LD | BPF_B | BPF_IND, 12);                /* the state */
  for (unsigned state = 4; state <= 6; state++) { to_drop[nd++] = n; JMP(BPF_JMP | BPF_JEQ | BPF_K, state, 0, 0); }
  unsigned accept = n;
  OP(BPF_RET | BPF_K, ACCEPT_ALL);
  unsigned drop = n;
  OP(BPF_RET | BPF_K, 0);
  /* A "not" jump goes to accept when false; a drop jump goes to drop when true. */
  for (unsigned i = 0; i < na; i++) {
    struct sock_filter *f = &filter_prog[to_accept[i]];
    if (BPF_OP(f->code) == BPF_JA) f->k = accept - to_accept[i] - 1;
    else f->jf = (uint8_t)(accept - to_accept[i] - 1);
  }
  for (unsigned i = 0; i < nd; i++) filter_prog[to_drop[i]].jt = (uint8_t)(drop - to_drop[i] - 1);
  return n;
#undef SLOT
#undef OP
#undef JMP
#undef JMP_ACCEPT_IF_NOT
}

static int events(int bytes) {
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (s < 0) { perror("socket"); return 1; }
  /* Root may exceed net.core.rmem_max (the kernel doubles the value). */
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0 && setsockopt(s, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) < 0) {
    perror("setsockopt");
    return 1;
  }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* (On a big-endian machine the byte loads would read the high bytes: every event goes up instead.) */
  struct sock_fprog prog = { .len = (unsigned short)build_filter(), .filter = filter_prog };
  if (setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0) { perror("SO_ATTACH_FILTER"); return 1; }
#endif
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = EVENT_GROUPS };
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("bind"); return 1; }
  int got = 0;
  socklen_t gl = sizeof got;
  getsockopt(s, SOL_SOCKET, SO_RCVBUF, &got, &gl);
  out_line("R %d\n", got);
  out_flush();

  static uint8_t buf[1 << 20];
  struct pollfd fds[2] = { { .fd = s, .events = POLLIN }, { .fd = STDIN_FILENO, .events = POLLIN } };
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      perror("poll");
      return 1;
    }
    if (fds[1].revents) {
      char x[4096];
      ssize_t n = read(STDIN_FILENO, x, sizeof x);
      if (n <= 0 && !(n < 0 && errno == EINTR)) return 0;
    }
    if (!(fds[0].revents & POLLIN)) continue;
    /* A burst: up to 512 reads, then one write. */
    for (int i = 0; i < 512; i++) {
      ssize_t n = recv(s, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == ENOBUFS) { out_line("L ENOBUFS\n"); continue; }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
        perror("recv");
        return 1;
      }
      int len = (int)n;
      for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) event(h);
    }
    if (out_len > 0) out_flush();
  }
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "events") == 0) {
    char *end;
    long bytes = strtol(argv[2], &end, 10);
    if (*end != '\0' || bytes <= 0 || bytes > 1L << 30) { fprintf(stderr, "lbd-ctnl: BYTES %s is not a buffer size in 1..2^30\n", argv[2]); return 2; }
    return events((int)bytes);
  }
  fprintf(stderr, "usage: lbd-ctnl events BYTES\n");
  return 2;
}
