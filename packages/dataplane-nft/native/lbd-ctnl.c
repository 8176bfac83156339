/*
 * lbd-ctnl: the agent's conversation with ctnetlink, in C. Three modes; events and write are the compiled form of
 * the modes of ctnetlink.ts's `perl -e CTNL_SCRIPT`, speaking the same protocol (ctnetlink.ts documents them):
 *
 * `lbd-ctnl events BYTES [keep-young]` prints the kernel's conntrack events, one line each (parseEventLine reads
 * them):
 *
 *   R <rcvbuf>               the subscription is live (SO_RCVBUF as the kernel set it)
 *   A <microseconds>         the lines up to the next A were read from the kernel, the first this long ago
 *   L ENOBUFS                the kernel dropped events (one line per failed read)
 *   L TRUNCATED              an event larger than this program reads one was cut short (none is: a loss all the same)
 *   <N|U|D> <injected 0|1> <tcp|udp> <orig src> <orig sport> <orig dst> <orig dport>
 *           <reply src> <reply sport> <reply dst> <reply dport> <state|-> <timeout s> <mark> <synproxy|-> <seqadj|->
 *
 * With keep-young, the events of TCP handshakes stay here (young_keep, below) and go up only when the agent
 * asks with a line `Y` on stdin, before a planned handover: each as its latest event line with the kind `Y`,
 * then a line `K <count>`.
 *
 * `lbd-ctnl write BYTES` makes inserts, updates and deletes asked for on stdin, each answered on its own
 * (write_mode, below).
 *
 * `lbd-ctnl dump` lists the whole table once and exits (dump_mode, below), a line per tcp and udp entry:
 *
 *   E <status> <tcp|udp> <orig src> ... <mark> <synproxy|-> <seqadj|->   (as an event line; status: CTA_STATUS)
 *
 * It replaces `conntrack -L`'s text for the agent's listings (the perl helper's dump, where lbd-ctnl was not built).
 *
 * Why C: the perl reader decoded every update of every connection at about 0.4 of a core at the connsync
 * benchmark's load, and `conntrack -R` cost a standby a process start per batch (docs/kernel-io.md has
 * the figures). It uses libc only (no libmnl or libnetfilter_conntrack to install), so the Debian package
 * depends on nothing new.
 *
 * Events: only what sync can use is printed: TCP and UDP entries with a mark (lbd's own connections), and
 * the watch's probe (udp 127.0.0.1 -> 127.0.0.1:9, mark 0). Both modes exit at EOF on stdin, so they never
 * outlive the agent, and when stdout is gone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * The write mode's state (a batch's codes, the chunk, the sequence numbers, the receive buffers): one set in this
 * program; ctnl-writer.c, the same code as an addon, has one per thread that writes (_Thread_local).
 */
#ifndef THREAD_LOCAL
#define THREAD_LOCAL
#endif

#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif

enum { NFNL_SUBSYS_CTNETLINK = 1, IPCTNL_MSG_CT_NEW = 0, IPCTNL_MSG_CT_GET = 1, IPCTNL_MSG_CT_DELETE = 2 };
enum {
  CTA_TUPLE_ORIG = 1, CTA_TUPLE_REPLY = 2, CTA_STATUS = 3, CTA_PROTOINFO = 4, CTA_TIMEOUT = 7, CTA_MARK = 8,
  CTA_SEQ_ADJ_ORIG = 15, CTA_SEQ_ADJ_REPLY = 16, CTA_SYNPROXY = 24, CTA_MAX_USED = 24,
};
enum { CTA_SEQADJ_CORRECTION_POS = 1, CTA_SEQADJ_OFFSET_BEFORE = 2, CTA_SEQADJ_OFFSET_AFTER = 3 };
enum { CTA_SYNPROXY_ISN = 1, CTA_SYNPROXY_ITS = 2, CTA_SYNPROXY_TSOFF = 3 };
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

/* Text of any length (an `R` line holds a character per request of its batch). */
static void out_text(const char *p, size_t n) {
  if (out_cap - out_len < n) {
    while (out_cap - out_len < n) out_cap = out_cap ? out_cap * 2 : 1 << 20;
    out_buf = realloc(out_buf, out_cap);
    if (out_buf == NULL) { perror("realloc"); exit(1); }
  }
  memcpy(out_buf + out_len, p, n);
  out_len += n;
}

/* Three be32 attributes 1..3 of a nested attribute, as "a,b,c"; 0 when one is missing. */
static int three_u32(const struct attr *nested, char *buf, size_t size) {
  if (nested->p == NULL) return 0;
  struct attr in[4];
  attrs(nested->p, nested->len, in, 3);
  for (unsigned i = 1; i <= 3; i++) if (in[i].len < 4) return 0;
  snprintf(buf, size, "%u,%u,%u", be32(&in[1]), be32(&in[2]), be32(&in[3]));
  return 1;
}

/*
 * A SYN-proxied connection's two fields: CTA_SYNPROXY as "isn,its,tsoff" and CTA_SEQ_ADJ_ORIG, _REPLY as six
 * numbers, each "-" when the message lacks it. An event has them only when they changed (the proxy's SYN to the
 * real server, its answer); a dump always has them (a synproxy extension of zeros on every entry ctnetlink made,
 * which the agent reads as none).
 */
static void proxy_fields(const struct attr *a, char *synproxy, size_t sp_size, char *seqadj, size_t sa_size) {
  if (!three_u32(&a[CTA_SYNPROXY], synproxy, sp_size)) snprintf(synproxy, sp_size, "-");
  char orig[40], reply[40];
  if (three_u32(&a[CTA_SEQ_ADJ_ORIG], orig, sizeof orig) && three_u32(&a[CTA_SEQ_ADJ_REPLY], reply, sizeof reply)) {
    snprintf(seqadj, sa_size, "%s,%s", orig, reply);
  } else {
    snprintf(seqadj, sa_size, "-");
  }
}

/*
 * keep-young: the TCP handshakes under way (SYN_SENT, SYN_RECV, SYN_SENT2) of marked connections, by original
 * tuple, each as its latest event line. Sync copies a TCP connection once it is established and sends a
 * handshake only when its group is handed over (ConnectionSource.handOverYoung); at 5 000 new connections a
 * second the two handshake events of each were two fifths of the lines the agent parsed for nothing. They
 * are kept here instead, and the agent reads them when it needs them (`Y`). A connection leaves when it is
 * established, ends or is handed over. Bounded as the agent's own young map was: past YOUNG_MAX (a SYN flood)
 * new handshakes are not kept. A loss of events (ENOBUFS) empties it: what it holds may have ended unseen.
 *
 * Also dropped with keep-young: the destroy of an established (assured) TCP connection in TIME_WAIT or CLOSE.
 * Its update into that state went up already, and sync removed its copies then (TIME_WAIT lasts two minutes);
 * the destroy says nothing new. (A handshake refused by a reset is destroyed in CLOSE without such an update:
 * not assured, so that destroy goes up.) After a loss the agent reads the whole table, which tells it what
 * ended unseen.
 */
static bool keep_young;
#define YOUNG_MAX 65536
#define YOUNG_BUCKETS 131072u /* a power of two */
struct young { struct young *next; uint32_t hash; char *line; char key[]; };
static struct young *young_buckets[YOUNG_BUCKETS];
static size_t young_count;

static uint32_t young_hash(const char *key) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const unsigned char *c = (const unsigned char *)key; *c; c++) h = (h ^ *c) * 16777619u;
  return h;
}

/* The slot that points at `key`'s entry, or at the NULL that ends its bucket. */
static struct young **young_slot(const char *key, uint32_t hash) {
  struct young **y = &young_buckets[hash & (YOUNG_BUCKETS - 1)];
  while (*y != NULL && ((*y)->hash != hash || strcmp((*y)->key, key) != 0)) y = &(*y)->next;
  return y;
}

static void young_keep(const char *key, const char *line) {
  uint32_t hash = young_hash(key);
  struct young **y = young_slot(key, hash);
  char *copy = strdup(line);
  if (copy == NULL) { perror("strdup"); exit(1); }
  if (*y != NULL) { free((*y)->line); (*y)->line = copy; return; }
  if (young_count >= YOUNG_MAX) { free(copy); return; }
  struct young *n = malloc(sizeof *n + strlen(key) + 1);
  if (n == NULL) { perror("malloc"); exit(1); }
  n->next = NULL;
  n->hash = hash;
  n->line = copy;
  strcpy(n->key, key);
  *y = n;
  young_count++;
}

static void young_forget(const char *key) {
  if (young_count == 0) return;
  struct young **y = young_slot(key, young_hash(key));
  if (*y == NULL) return;
  struct young *gone = *y;
  *y = gone->next;
  free(gone->line);
  free(gone);
  young_count--;
}

/* Each kept handshake as a Y line (when `print`), then forgotten: the agent holds what it read. */
static void young_take(bool print) {
  size_t n = 0;
  for (size_t b = 0; b < YOUNG_BUCKETS && young_count > 0; b++) {
    while (young_buckets[b] != NULL) {
      struct young *y = young_buckets[b];
      young_buckets[b] = y->next;
      if (print) { out_line("Y%s", y->line + 1); n++; }
      free(y->line);
      free(y);
      young_count--;
    }
  }
  if (print) out_line("K %zu\n", n);
}

/*
 * One ctnetlink message (after its nlmsghdr) as a line: an event line when sync can use it, or (`dumped`) a dump's
 * E line for every tcp and udp entry, marked or not (a mark-0 entry with a connection's tuple still blocks its
 * insert, so apply must see those too).
 */
static void entry_line(const struct nlmsghdr *h, bool dumped) {
  unsigned msg = h->nlmsg_type & 0xff;
  if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_CTNETLINK || msg == IPCTNL_MSG_CT_GET) return;
  if (h->nlmsg_len < NLMSG_HDRLEN + 4) return;
  struct attr a[CTA_MAX_USED + 1];
  attrs((const uint8_t *)h + NLMSG_HDRLEN + 4, h->nlmsg_len - NLMSG_HDRLEN - 4, a, CTA_MAX_USED);
  uint32_t mark = a[CTA_MARK].len >= 4 ? be32(&a[CTA_MARK]) : 0;
  struct tuple o, r;
  if (!tuple(&a[CTA_TUPLE_ORIG], &o) || (o.proto != 6 && o.proto != 17)) return;
  if (!dumped && mark == 0 && !(o.proto == 17 && strcmp(o.src, "127.0.0.1") == 0 && strcmp(o.dst, "127.0.0.1") == 0 && o.dport == 9)) return;
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
  char kind = dumped ? 'E' : msg == IPCTNL_MSG_CT_DELETE ? 'D' : (h->nlmsg_flags & NLM_F_CREATE) ? 'N' : 'U';
  /* An event says whether a program made it; a dump's entry, its status bits (seen reply, assured). */
  uint32_t second = dumped ? status : h->nlmsg_pid != 0;
  uint32_t timeout = a[CTA_TIMEOUT].len >= 4 ? be32(&a[CTA_TIMEOUT]) : 0;
  char synproxy[40], seqadj[80];
  proxy_fields(a, synproxy, sizeof synproxy, seqadj, sizeof seqadj);
  if (keep_young && !dumped && o.proto == 6 && mark != 0) {
    char key[2 * INET6_ADDRSTRLEN + 16];
    snprintf(key, sizeof key, "%s %u %s %u", o.src, o.sport, o.dst, o.dport);
    bool handshake = strcmp(state, "SYN_SENT") == 0 || strcmp(state, "SYN_RECV") == 0 || strcmp(state, "LISTEN") == 0;
    /* A SYN-proxied connection's numbers come in its handshake's events: those go up as they come. (An entry
     * ctnetlink made has a synproxy extension of zeros: none.) */
    bool numbers = (strcmp(synproxy, "-") != 0 && strcmp(synproxy, "0,0,0") != 0) || strcmp(seqadj, "-") != 0;
    if (kind != 'D' && handshake && !numbers) {
      char line[512];
      snprintf(line, sizeof line, "%c %u tcp %s %u %s %u %s %u %s %u %s %u %u - -\n", kind, second,
               o.src, o.sport, o.dst, o.dport, r.src, r.sport, r.dst, r.dport, state, timeout, mark);
      young_keep(key, line);
      return;
    }
    /* A stateless update of a kept handshake (its status, its timeout) says nothing sync reads. */
    if (kind == 'U' && strcmp(state, "-") == 0 && !numbers && *young_slot(key, young_hash(key)) != NULL) return;
    young_forget(key);
    /* Assured: it was established, so its update into the ended state went up (a handshake refused is not). */
    if (kind == 'D' && (status & IPS_ASSURED) && (strcmp(state, "TIME_WAIT") == 0 || strcmp(state, "CLOSE") == 0)) return;
  }
  out_line("%c %u %s %s %u %s %u %s %u %s %u %s %u %u %s %s\n", kind, second, o.proto == 6 ? "tcp" : "udp",
           o.src, o.sport, o.dst, o.dport, r.src, r.sport, r.dst, r.dport, state, timeout, mark, synproxy, seqadj);
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

/* A NETLINK_NETFILTER socket with a receive buffer of `bytes`, or -1 (said on stderr). */
static int ctnetlink_socket(int bytes) {
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (s < 0) { perror("socket"); return -1; }
  /* Root may exceed net.core.rmem_max (the kernel doubles the value). */
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0 && setsockopt(s, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) < 0) {
    perror("setsockopt");
    close(s);
    return -1;
  }
  return s;
}

/* How long events wait for company before they go up, and how much output goes up at once regardless. */
#define COALESCE_NS 2000000
#define COALESCE_MAX_BYTES (256 * 1024)

static int64_t ns_since(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)(now.tv_sec - t->tv_sec) * 1000000000 + (now.tv_nsec - t->tv_nsec);
}

/* Reads what the socket holds, up to 512 reads, into lines: 0, or -1 on an error (said on stderr). */
/*
 * Datagrams read RECV_BATCH at a time (recvmmsg): each event and each write's ack is a datagram of its own,
 * and on this kind of machine (a virtual one, where a system call traps) one recv per event was a third of
 * this program's time at 5 000 new connections/s. An event or an ack is well under a slot's size; a datagram
 * cut short (MSG_TRUNC) is said to be (events: a loss, so the agent reads the table again).
 */
#define RECV_BATCH 64
#define RECV_SLOT 8192
static THREAD_LOCAL uint8_t recv_bufs[RECV_BATCH][RECV_SLOT];
static THREAD_LOCAL struct mmsghdr recv_msgs[RECV_BATCH];
static THREAD_LOCAL struct iovec recv_iovs[RECV_BATCH];

/* Up to RECV_BATCH datagrams into recv_bufs (recv_msgs[i].msg_len bytes each); recvmmsg's result. */
static int recv_batch(int s, int flags) {
  for (int i = 0; i < RECV_BATCH; i++) {
    recv_iovs[i] = (struct iovec){ .iov_base = recv_bufs[i], .iov_len = RECV_SLOT };
    recv_msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &recv_iovs[i], .msg_iovlen = 1 } };
  }
  return recvmmsg(s, recv_msgs, RECV_BATCH, flags, NULL);
}

static int drain(int s) {
  /* At most 512 events a drain, as before batching: the window's timing and stdin stay served under a flood. */
  for (int got = 0; got < 512;) {
    int n = recv_batch(s, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == ENOBUFS) { out_line("L ENOBUFS\n"); young_take(false); got++; continue; }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      perror("recvmmsg");
      return -1;
    }
    for (int i = 0; i < n; i++) {
      if (recv_msgs[i].msg_hdr.msg_flags & MSG_TRUNC) { out_line("L TRUNCATED\n"); young_take(false); continue; }
      int len = (int)recv_msgs[i].msg_len;
      for (const struct nlmsghdr *h = (const struct nlmsghdr *)recv_bufs[i]; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) entry_line(h, false);
    }
    got += n;
  }
  return 0;
}

/*
 * The lines read since `first`, after an `A <microseconds>` line saying how long ago the first of them was
 * read: the agent dates the events by it, so the window is counted in sync's lag, not hidden.
 */
static void flush_events(const struct timespec *first) {
  if (out_len == 0) return;
  char age[32];
  int n = snprintf(age, sizeof age, "A %lld\n", (long long)(ns_since(first) / 1000));
  size_t o = 0;
  while (o < (size_t)n) {
    ssize_t w = write(STDOUT_FILENO, age + o, (size_t)n - o);
    if (w < 0) {
      if (errno == EINTR) continue;
      exit(0);
    }
    o += (size_t)w;
  }
  out_flush();
}

static int events(int bytes) {
  int s = ctnetlink_socket(bytes);
  if (s < 0) return 1;
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

  struct pollfd fds[2] = { { .fd = s, .events = POLLIN }, { .fd = STDIN_FILENO, .events = POLLIN } };
  struct timespec first = { 0, 0 };
  for (;;) {
    /*
     * Events wait up to COALESCE_NS in the socket for company, then go up in one write. The agent is then woken
     * once per window, not once per event (a new connection is about five events), and so is this program:
     * while a window is open it does not poll the socket at all (its buffer holds what comes meanwhile).
     */
    struct timespec wait, *timeout = NULL;
    if (out_len > 0) {
      int64_t left = COALESCE_NS - ns_since(&first);
      if (left <= 0 || out_len >= COALESCE_MAX_BYTES) {
        if (drain(s) < 0) return 1;
        flush_events(&first);
        continue;
      }
      wait = (struct timespec){ .tv_sec = left / 1000000000, .tv_nsec = left % 1000000000 };
      timeout = &wait;
    }
    fds[0].events = out_len > 0 ? 0 : POLLIN;
    if (ppoll(fds, 2, timeout, NULL) < 0) {
      if (errno == EINTR) continue;
      perror("poll");
      return 1;
    }
    if (fds[1].revents) {
      char x[4096];
      ssize_t n = read(STDIN_FILENO, x, sizeof x);
      if (n <= 0 && !(n < 0 && errno == EINTR)) return 0;
      /*
       * `Y`: the kept handshakes, after the events read before the question (so the agent reads them in order).
       * Every question gets an answer (the agent counts them), the second of two read at once an empty one.
       */
      size_t questions = 0;
      for (ssize_t i = 0; i < n; i++) questions += x[i] == 'Y';
      if (questions > 0) {
        if (out_len == 0) clock_gettime(CLOCK_MONOTONIC, &first);
        if (drain(s) < 0) return 1;
        if (out_len > 0) flush_events(&first);
        while (questions-- > 0) young_take(true);
        out_flush();
      }
    }
    if (!(fds[0].revents & POLLIN)) continue;
    clock_gettime(CLOCK_MONOTONIC, &first);
    if (drain(s) < 0) return 1;
  }
}

/*
 * `lbd-ctnl write BYTES`: changes to the table, the compiled form of CTNL_SCRIPT's `write` mode plus inserts
 * (ctnetlink.ts documents the protocol). Requests on stdin, one a line, in batches ended by a line `.`:
 *
 *   D <tcp|udp> <src> <sport> <dst> <dport>                                    delete by original tuple
 *   U <tcp|udp> <src> <sport> <dst> <dport> <status> <timeout> <mark> <tcp state|-1> <synproxy|-> <seqadj|->
 *   I <tcp|udp> <src> <sport> <dst> <dport> <status> <timeout> <mark> <tcp state|-1> <dnat addr> <dnat port> <snat addr|-> <snat port|->
 *     <synproxy|-> <seqadj|->
 * (synproxy and seqadj as an event line has them: CTA_SYNPROXY and CTA_SEQ_ADJ_ORIG, _REPLY, for tcp only; at
 * most 424 bytes a request, an IPv6 insert with both, within MAX_REQUEST)
 *
 * A delete is IPCTNL_MSG_CT_DELETE, an update IPCTNL_MSG_CT_NEW without NLM_F_CREATE, an insert one with
 * NLM_F_CREATE | NLM_F_EXCL carrying both tuples and the NAT binding (CTA_NAT_DST, then CTA_NAT_SRC for
 * fullnat: the kernel sets the binding up as its nat hooks would, and the reply tuple follows). Each is one
 * hash lookup in the kernel and each is acked (NLM_F_ACK), so every request gets its own answer, where
 * `conntrack -R` stops at the first line it cannot make without saying which. One line answers a batch:
 *
 *   R <done> <absent> <failed> <codes> <first error: "errno text" | ->
 *
 * codes has one character per request, in order: + done, - absent (ENOENT), = there already (EEXIST, an
 * insert), ! failed ("." for none). Requests go out up to 64 KiB per send(); acks wait at most 5 s.
 */
enum { CTA_NAT_SRC = 6, CTA_NAT_DST = 13 };
enum { CTA_NAT_V4_MINIP = 1, CTA_NAT_V4_MAXIP = 2, CTA_NAT_PROTO = 3, CTA_NAT_V6_MINIP = 4, CTA_NAT_V6_MAXIP = 5 };
enum { CTA_PROTONAT_PORT_MIN = 1, CTA_PROTONAT_PORT_MAX = 2 };
#define CHUNK_BYTES 65536
#define MAX_REQUEST 512

struct msgbuf { uint8_t b[MAX_REQUEST]; size_t n; size_t nests[4]; unsigned depth; };

static void put(struct msgbuf *m, uint16_t type, const void *p, size_t len) {
  uint16_t l = (uint16_t)(4 + len);
  memcpy(m->b + m->n, &l, 2);
  memcpy(m->b + m->n + 2, &type, 2);
  if (len) memcpy(m->b + m->n + 4, p, len);
  m->n += 4 + len;
  while (m->n % 4) m->b[m->n++] = 0;
}
static void put_u8(struct msgbuf *m, uint16_t type, uint8_t v) { put(m, type, &v, 1); }
static void put_be16(struct msgbuf *m, uint16_t type, unsigned v) { uint16_t x = htons((uint16_t)v); put(m, type, &x, 2); }
static void put_be32(struct msgbuf *m, uint16_t type, uint32_t v) { uint32_t x = htonl(v); put(m, type, &x, 4); }
static void nest(struct msgbuf *m, uint16_t type) { m->nests[m->depth++] = m->n; put(m, (uint16_t)(type | NLA_F_NESTED), NULL, 0); }
static void end(struct msgbuf *m) { size_t at = m->nests[--m->depth]; uint16_t l = (uint16_t)(m->n - at); memcpy(m->b + at, &l, 2); }

struct addr { int family; uint8_t a[16]; };

static int parse_addr(const char *s, struct addr *a) {
  if (s == NULL) return 0;
  if (inet_pton(AF_INET, s, a->a) == 1) { a->family = AF_INET; return 1; }
  if (inet_pton(AF_INET6, s, a->a) == 1) { a->family = AF_INET6; return 1; }
  return 0;
}
static int parse_uint(const char *s, unsigned long max, unsigned long *v) {
  if (s == NULL || *s == '\0') return 0;
  char *e;
  errno = 0;
  *v = strtoul(s, &e, 10);
  return *e == '\0' && errno == 0 && *v <= max && s[0] != '-';
}
/* "a,b,c,..." of exactly `count` u32s; 0 otherwise. */
static int parse_u32_list(const char *s, uint32_t *v, unsigned count) {
  char buf[128];
  size_t len = strlen(s);
  /* strtok_r would pass over an empty number: "1,,2" is not a list of three. */
  if (len == 0 || len >= sizeof buf || s[0] == ',' || s[len - 1] == ',' || strstr(s, ",,") != NULL) return 0;
  strcpy(buf, s);
  unsigned n = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    unsigned long x;
    if (n == count || !parse_uint(t, 0xffffffffUL, &x)) return 0;
    v[n++] = (uint32_t)x;
  }
  return n == count;
}

static void put_ip(struct msgbuf *m, const struct addr *src, const struct addr *dst) {
  nest(m, CTA_TUPLE_IP);
  size_t len = src->family == AF_INET ? 4 : 16;
  put(m, src->family == AF_INET ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, src->a, len);
  put(m, src->family == AF_INET ? CTA_IP_V4_DST : CTA_IP_V6_DST, dst->a, len);
  end(m);
}
static void put_tuple(struct msgbuf *m, uint16_t type, uint8_t proto, const struct addr *src, unsigned sport, const struct addr *dst, unsigned dport) {
  nest(m, type);
  put_ip(m, src, dst);
  nest(m, CTA_TUPLE_PROTO);
  put_u8(m, CTA_PROTO_NUM, proto);
  put_be16(m, CTA_PROTO_SRC_PORT, sport);
  put_be16(m, CTA_PROTO_DST_PORT, dport);
  end(m);
  end(m);
}
static void put_nat(struct msgbuf *m, uint16_t type, const struct addr *a, unsigned port) {
  nest(m, type);
  size_t len = a->family == AF_INET ? 4 : 16;
  put(m, a->family == AF_INET ? CTA_NAT_V4_MINIP : CTA_NAT_V6_MINIP, a->a, len);
  put(m, a->family == AF_INET ? CTA_NAT_V4_MAXIP : CTA_NAT_V6_MAXIP, a->a, len);
  nest(m, CTA_NAT_PROTO);
  put_be16(m, CTA_PROTONAT_PORT_MIN, port);
  put_be16(m, CTA_PROTONAT_PORT_MAX, port);
  end(m);
  end(m);
}

/* One request line as a message after the nlmsghdr's place; 0 when the line is not a request. */
static int request(char *line, struct msgbuf *m, uint16_t *type, uint16_t *flags) {
  char *f[17];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, " ", &save); t != NULL && n < 17; t = strtok_r(NULL, " ", &save)) f[n++] = t;
  for (int i = n; i < 17; i++) f[i] = NULL;
  char op = f[0] && f[0][1] == '\0' ? f[0][0] : 0;
  if (!(((op == 'D' || op == 'X') && n == 6) || (op == 'U' && n == 12) || (op == 'I' && n == 16))) return 0;
  uint8_t proto = strcmp(f[1], "tcp") == 0 ? 6 : strcmp(f[1], "udp") == 0 ? 17 : 0;
  struct addr src, dst;
  unsigned long sport, dport;
  if (!proto || !parse_addr(f[2], &src) || !parse_addr(f[4], &dst) || src.family != dst.family
      || !parse_uint(f[3], 65535, &sport) || !parse_uint(f[5], 65535, &dport)) return 0;
  m->n = NLMSG_HDRLEN;
  m->depth = 0;
  uint8_t nfgen[4] = { (uint8_t)src.family, 0, 0, 0 };
  memcpy(m->b + m->n, nfgen, 4);
  m->n += 4;
  /* X names the entry by its reply tuple (after NAT): only the entry with that binding matches. */
  put_tuple(m, op == 'X' ? CTA_TUPLE_REPLY : CTA_TUPLE_ORIG, proto, &src, (unsigned)sport, &dst, (unsigned)dport);
  if (op == 'D' || op == 'X') {
    *type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
    *flags = NLM_F_REQUEST | NLM_F_ACK;
    return 1;
  }
  unsigned long status, timeout, mark;
  long state = strtol(f[9], NULL, 10);
  if (!parse_uint(f[6], 0xffffffffUL, &status) || !parse_uint(f[7], 0xffffffffUL, &timeout) || !parse_uint(f[8], 0xffffffffUL, &mark)
      || state < -1 || state > 9 || (proto != 6 && state >= 0)) return 0;
  *type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW;
  *flags = NLM_F_REQUEST | NLM_F_ACK;
  if (op == 'I') {
    /* The reply tuple before NAT; the kernel rewrites it to the binding's as it sets the binding up. */
    put_tuple(m, CTA_TUPLE_REPLY, proto, &dst, (unsigned)dport, &src, (unsigned)sport);
    struct addr dnat, snat;
    unsigned long dnat_port, snat_port = 0;
    int fullnat = strcmp(f[12], "-") != 0;
    if (!parse_addr(f[10], &dnat) || dnat.family != src.family || !parse_uint(f[11], 65535, &dnat_port)) return 0;
    if (fullnat && (!parse_addr(f[12], &snat) || snat.family != src.family || !parse_uint(f[13], 65535, &snat_port))) return 0;
    if (!fullnat && strcmp(f[13], "-") != 0) return 0;
    put_nat(m, CTA_NAT_DST, &dnat, (unsigned)dnat_port);
    if (fullnat) put_nat(m, CTA_NAT_SRC, &snat, (unsigned)snat_port);
    *flags |= NLM_F_CREATE | NLM_F_EXCL;
  }
  if (status) put_be32(m, CTA_STATUS, (uint32_t)status);
  put_be32(m, CTA_TIMEOUT, (uint32_t)timeout);
  put_be32(m, CTA_MARK, (uint32_t)mark);
  if (state >= 0) {
    nest(m, CTA_PROTOINFO);
    nest(m, CTA_PROTOINFO_TCP);
    put_u8(m, CTA_PROTOINFO_TCP_STATE, (uint8_t)state);
    end(m);
    end(m);
  }
  /* The SYN proxy's fields, last two of U and I: "-" or numbers as an event line has them. */
  const char *sp = f[op == 'I' ? 14 : 10], *sa = f[op == 'I' ? 15 : 11];
  uint32_t v[6];
  if (strcmp(sp, "-") != 0) {
    if (proto != 6 || !parse_u32_list(sp, v, 3)) return 0;
    nest(m, CTA_SYNPROXY);
    put_be32(m, CTA_SYNPROXY_ISN, v[0]);
    put_be32(m, CTA_SYNPROXY_ITS, v[1]);
    put_be32(m, CTA_SYNPROXY_TSOFF, v[2]);
    end(m);
  }
  if (strcmp(sa, "-") != 0) {
    if (proto != 6 || !parse_u32_list(sa, v, 6)) return 0;
    for (unsigned d = 0; d < 2; d++) {
      nest(m, d == 0 ? CTA_SEQ_ADJ_ORIG : CTA_SEQ_ADJ_REPLY);
      put_be32(m, CTA_SEQADJ_CORRECTION_POS, v[3 * d]);
      put_be32(m, CTA_SEQADJ_OFFSET_BEFORE, v[3 * d + 1]);
      put_be32(m, CTA_SEQADJ_OFFSET_AFTER, v[3 * d + 2]);
      end(m);
    }
  }
  return 1;
}

/* One batch's answers, one character per request. */
static THREAD_LOCAL char *codes;
static THREAD_LOCAL size_t ncodes, codes_cap;
static THREAD_LOCAL char first_error[256];

static void note_error(int err, const char *what) {
  if (first_error[0] == '\0') snprintf(first_error, sizeof first_error, "%d %s", err, what ? what : strerror(err));
}
static void push_code(char c) {
  if (ncodes == codes_cap) {
    codes_cap = codes_cap ? codes_cap * 2 : 4096;
    codes = realloc(codes, codes_cap);
    if (codes == NULL) { perror("realloc"); exit(1); }
  }
  codes[ncodes++] = c;
}

static THREAD_LOCAL uint8_t chunk[CHUNK_BYTES];
static THREAD_LOCAL size_t chunk_len;
/* The requests in the chunk: codes [chunk_base, chunk_base + chunk_count), sequence numbers chunk_seq0... */
static THREAD_LOCAL size_t chunk_base, chunk_count;
static THREAD_LOCAL uint32_t seq, chunk_seq0;

static void flush_chunk(int s) {
  if (chunk_count == 0) return;
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  ssize_t w;
  do w = sendto(s, chunk, chunk_len, 0, (struct sockaddr *)&kernel, sizeof kernel); while (w < 0 && errno == EINTR);
  if (w < 0) {
    note_error(errno, NULL);
    for (size_t i = 0; i < chunk_count; i++) codes[chunk_base + i] = '!';
  } else {
    size_t left = chunk_count;
    while (left > 0) {
      /* Blocks (SO_RCVTIMEO: 5 s) for the first ack, then takes what else is there: one call for many acks. */
      int n = recv_batch(s, MSG_WAITFORONE);
      if (n < 0) {
        if (errno == EINTR) continue;
        note_error(errno, NULL);
        break; /* the unanswered keep '!' */
      }
      for (int m = 0; m < n; m++) {
        int len = (int)recv_msgs[m].msg_len;
        for (const struct nlmsghdr *h = (const struct nlmsghdr *)recv_bufs[m]; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
          if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_len < NLMSG_HDRLEN + 4) continue;
          uint32_t i = h->nlmsg_seq - chunk_seq0;
          if (i >= chunk_count || codes[chunk_base + i] != '?') continue;
          int err;
          memcpy(&err, NLMSG_DATA(h), 4);
          err = -err;
          char c = err == 0 ? '+' : err == ENOENT ? '-' : err == EEXIST ? '=' : '!';
          if (c == '!') note_error(err, NULL);
          codes[chunk_base + i] = c;
          left--;
        }
      }
    }
    for (size_t i = 0; i < chunk_count; i++) if (codes[chunk_base + i] == '?') codes[chunk_base + i] = '!';
  }
  chunk_len = 0;
  chunk_count = 0;
}

/* The write mode's socket: acks without the request copied back, a 5 s wait at most for one, bound. -1: said on stderr. */
static int write_socket(int bytes) {
  int s = ctnetlink_socket(bytes);
  if (s < 0) return -1;
  int one = 1;
  setsockopt(s, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  struct timeval tv = { .tv_sec = 5 };
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) { perror("setsockopt"); close(s); return -1; }
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("bind"); close(s); return -1; }
  return s;
}

/*
 * One line of a batch (without its newline): a request, queued and sent as the chunk fills, or "." to end the
 * batch. True for ".": batch_result() then gives the answer.
 */
static bool write_line(int s, char *line, size_t got) {
  static THREAD_LOCAL struct msgbuf m;
  if (strcmp(line, ".") == 0) {
    flush_chunk(s);
    return true;
  }
  char copy[MAX_REQUEST];
  snprintf(copy, sizeof copy, "%s", line);
  uint16_t type, flags;
  if (got >= sizeof copy || !request(line, &m, &type, &flags)) {
    flush_chunk(s); /* keeps the answers in order */
    push_code('!');
    char what[sizeof first_error - 16];
    snprintf(what, sizeof what, "bad request: %.200s", copy);
    note_error(0, what);
    return false;
  }
  if (chunk_len + m.n > sizeof chunk) flush_chunk(s);
  if (chunk_count == 0) { chunk_base = ncodes; chunk_seq0 = seq + 1; }
  struct nlmsghdr h = { .nlmsg_len = (uint32_t)m.n, .nlmsg_type = type, .nlmsg_flags = flags, .nlmsg_seq = ++seq };
  memcpy(m.b, &h, sizeof h);
  memcpy(chunk + chunk_len, m.b, m.n);
  chunk_len += m.n;
  chunk_count++;
  push_code('?');
  return false;
}

/* Ends the batch: its `R` line (no newline, malloc'd) and a clean slate for the next. */
static char *batch_result(void) {
  size_t done = 0, absent = 0, failed = 0;
  for (size_t i = 0; i < ncodes; i++) done += codes[i] == '+', absent += codes[i] == '-', failed += codes[i] == '!';
  push_code('\0');
  char *r = NULL;
  if (asprintf(&r, "R %zu %zu %zu %s %s", done, absent, failed, ncodes > 1 ? codes : ".", first_error[0] ? first_error : "-") < 0) { perror("asprintf"); exit(1); }
  ncodes = 0;
  first_error[0] = '\0';
  return r;
}

static int write_mode(int bytes) {
  int s = write_socket(bytes);
  if (s < 0) return 1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, stdin)) >= 0) {
    if (got > 0 && line[got - 1] == '\n') line[--got] = '\0';
    if (!write_line(s, line, (size_t)got)) continue;
    char *r = batch_result();
    out_text(r, strlen(r));
    out_text("\n", 1);
    out_flush();
    free(r);
  }
  return 0;
}

/*
 * `lbd-ctnl dump`: one netlink dump of the whole table (both address families), an E line per tcp and udp
 * entry, then exit 0; anything else the kernel answers, or a failed read, is said on stderr with exit 1, so a
 * partial listing is never taken for a whole one. Output goes up in pieces of about 1 MiB.
 */
static int dump_mode(void) {
  int s = ctnetlink_socket(4 << 20);
  if (s < 0) return 1;
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("bind"); return 1; }
  /* nfgenmsg: family AF_UNSPEC (both), version 0, resource id 0. */
  struct { struct nlmsghdr h; uint8_t nfgen[4]; } req = {
    .h = { .nlmsg_len = sizeof req, .nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET,
           .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
    .nfgen = { AF_UNSPEC, 0, 0, 0 },
  };
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  ssize_t w;
  do w = sendto(s, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel); while (w < 0 && errno == EINTR);
  if (w < 0) { perror("sendto"); return 1; }
  static uint8_t buf[1 << 20];
  for (;;) {
    ssize_t n = recv(s, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("recv");
      return 1;
    }
    int len = (int)n;
    for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) { out_flush(); return 0; }
      if (h->nlmsg_type == NLMSG_ERROR) {
        int err = 0;
        if (h->nlmsg_len >= NLMSG_HDRLEN + 4) memcpy(&err, NLMSG_DATA(h), 4);
        fprintf(stderr, "lbd-ctnl: the kernel refused the dump: %s\n", strerror(-err));
        return 1;
      }
      entry_line(h, true);
    }
    if (out_len >= (1 << 20)) out_flush();
  }
}

#ifndef LBD_CTNL_IN_PROCESS
int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "events") == 0 && strcmp(argv[3], "keep-young") == 0) {
    keep_young = true;
    argc = 3;
  }
  if (argc == 3 && (strcmp(argv[1], "events") == 0 || strcmp(argv[1], "write") == 0)) {
    char *end;
    long bytes = strtol(argv[2], &end, 10);
    if (*end != '\0' || bytes <= 0 || bytes > 1L << 30) { fprintf(stderr, "lbd-ctnl: BYTES %s is not a buffer size in 1..2^30\n", argv[2]); return 2; }
    return argv[1][0] == 'e' ? events((int)bytes) : write_mode((int)bytes);
  }
  if (argc == 2 && strcmp(argv[1], "dump") == 0) return dump_mode();
  fprintf(stderr, "usage: lbd-ctnl events BYTES [keep-young] | write BYTES | dump\n");
  return 2;
}
#endif
