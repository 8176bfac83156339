/*
 * lbd-nfbatch: sends nfnetlink batches to nf_tables and says what the kernel answered to each.
 *
 * stdin is a sequence of frames: a 4-byte length (host order), then that many bytes of one batch, whole:
 * NFNL_MSG_BATCH_BEGIN, the messages, NFNL_MSG_BATCH_END, as nft-netlink.ts encodes them. The kernel
 * applies a batch all or nothing (one nf_tables transaction), and the batches in the order they came. The
 * answer to each frame is one line on stdout:
 *
 *   ok                                    every message that asked for an ack (NLM_F_ACK) was acked
 *   failed <seq>:<errno>:<text> ...       the messages the kernel refused (each with its errno and strerror
 *                                         text, spaces as '_'); that transaction changed nothing
 *
 * Why a program of its own: nft parses a script's elements at about 7 us each, so a table of 10 000 services
 * (120 000 map elements) took 1.3 s to load; sent as netlink messages the kernel's share is what remains
 * (docs/kernel-io.md). It knows nothing of lbd's maps: what to send is decided and encoded in TypeScript,
 * where it is tested against what nft itself sends. Frames let the encoder write the next batch while the
 * kernel takes this one. libc only, as lbd-ctnl.
 *
 * Exit status: 0 at EOF, 1 when the kernel could not be asked or did not answer a frame in 10 s (the reason
 * on stderr), 2 when a frame is not a batch. It exits at EOF, so it never outlives the agent.
 *
 * `lbd-nfbatch counter FAMILY TABLE NAME` instead reads one named counter (NFT_MSG_GETOBJ) and prints
 * `packets N bytes M`: one request naming one object gets one answer, whatever the ruleset does meanwhile
 * (nft's listing fetches its cache again whenever the ruleset's generation changed, and every lease renewal
 * changes it). FAMILY is inet, ip, ip6 or arp. An error answer prints `failed <errno text>` and exits 1
 * (ENOENT: no such table or counter); no answer within 2 s exits 1 too.
 *
 * `lbd-nfbatch table FAMILY TABLE [FAMILY TABLE]...` asks whether each table exists (NFT_MSG_GETTABLE), one
 * line each in order: `table`, or `failed <errno text>` (ENOENT: it does not); exit 0 when all exist, else 1.
 * nft 1.0.6 fetches every element of every set for any listing of a table, even `list tables`, and the packet
 * path fills some of lbd's (a million remembered dr flows take tens of seconds): this is how the data plane
 * learns, without them, that it has no table yet. Several tables in one run, because each run is a process
 * start, which costs the agent's main thread 10-25 ms on a virtual machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_SNDBUFFORCE
#define SO_SNDBUFFORCE 32
#endif
#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif
#define NFNL_MSG_BATCH_BEGIN 0x10
#define NFNL_SUBSYS_NFTABLES 10
#define NFT_MSG_NEWTABLE 0
#define NFT_MSG_GETTABLE 1
#define NFTA_TABLE_NAME 1
#define NFT_MSG_NEWOBJ 18
#define NFT_MSG_GETOBJ 19
#define NFTA_OBJ_TABLE 1
#define NFTA_OBJ_NAME 2
#define NFTA_OBJ_TYPE 3
#define NFTA_OBJ_DATA 4
#define NFT_OBJECT_COUNTER 1
#define NFTA_COUNTER_BYTES 1
#define NFTA_COUNTER_PACKETS 2
#define MAX_BATCH (256u << 20)

/* Reads exactly n bytes; 0 at EOF before the first byte, -1 at EOF or error after it. */
static int read_exact(uint8_t *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(0, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { perror("lbd-nfbatch: read"); return -1; }
    if (r == 0) {
      if (got == 0) return 0;
      fprintf(stderr, "lbd-nfbatch: stdin ended inside a frame (%zu of %zu bytes)\n", got, n);
      return -1;
    }
    got += (size_t)r;
  }
  return 1;
}

/* Sends one batch and prints the kernel's answer; returns the exit status to stop with, or -1 to go on. */
static int one_batch(int s, const uint8_t *batch, size_t n) {
  /* The messages that wait for an answer, by sequence number: the batch must be whole netlink messages. */
  static uint32_t *want;
  static uint8_t *answered;
  static size_t cap;
  uint32_t begin_seq = 0;
  size_t nwant = 0, off = 0;
  int first = 1;
  while (off < n) {
    const struct nlmsghdr *h = (const struct nlmsghdr *)(batch + off);
    if (n - off < NLMSG_HDRLEN || h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > n - off) {
      fprintf(stderr, "lbd-nfbatch: a frame is not whole netlink messages (at byte %zu of %zu)\n", off, n);
      return 2;
    }
    if (first) {
      if (h->nlmsg_type != NFNL_MSG_BATCH_BEGIN) { fprintf(stderr, "lbd-nfbatch: a frame does not start with NFNL_MSG_BATCH_BEGIN\n"); return 2; }
      begin_seq = h->nlmsg_seq;
      first = 0;
    }
    if (h->nlmsg_flags & NLM_F_ACK) {
      if (nwant == cap) {
        cap = cap ? cap * 2 : 1024;
        want = realloc(want, cap * sizeof *want);
        answered = realloc(answered, cap);
        if (!want || !answered) { perror("lbd-nfbatch: malloc"); return 1; }
      }
      want[nwant++] = h->nlmsg_seq;
    }
    off += NLMSG_ALIGN(h->nlmsg_len);
  }
  if (first) { fprintf(stderr, "lbd-nfbatch: an empty frame\n"); return 2; }
  if (nwant > 0) memset(answered, 0, nwant);

  /* The whole batch goes in one send (the kernel takes a batch from one message). */
  int sndbuf = (int)n + 4096;
  if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0) setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  ssize_t sent = sendto(s, batch, n, 0, (struct sockaddr *)&kernel, sizeof kernel);
  if (sent < 0 || (size_t)sent != n) { perror("lbd-nfbatch: send"); return 1; }

  /* Answers: an ack or an error per message that asked, or one error for BATCH_BEGIN (refused whole). */
  size_t left = nwant, failures = 0, hint = 0, used = 0;
  static uint8_t buf[1 << 16];
  char line[4096] = "";
  int refused = 0;
  while (left > 0 && !refused) {
    ssize_t got = recv(s, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) fprintf(stderr, "lbd-nfbatch: %zu of %zu answers missing after 10 s\n", left, nwant);
      else perror("lbd-nfbatch: recv");
      return 1;
    }
    int len = (int)got;
    for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_len < NLMSG_HDRLEN + 4) continue;
      int err;
      memcpy(&err, NLMSG_DATA(h), 4);
      err = -err;
      if (err != 0) {
        failures++;
        char text[128];
        snprintf(text, sizeof text, "%s", strerror(err));
        for (char *c = text; *c; c++) if (*c == ' ') *c = '_';
        if (used < sizeof line - 200) used += (size_t)snprintf(line + used, sizeof line - used, " %u:%d:%s", h->nlmsg_seq, err, text);
        if (h->nlmsg_seq == begin_seq) refused = 1;
      }
      /* Answers come in the batch's order: look from where the last one was found. */
      for (size_t k = 0; k < nwant; k++) {
        size_t i = (hint + k) % nwant;
        if (want[i] == h->nlmsg_seq && !answered[i]) { answered[i] = 1; left--; hint = i + 1; break; }
      }
    }
  }
  if (failures == 0) printf("ok\n");
  else printf("failed%s\n", line);
  fflush(stdout);
  return -1;
}

/* Appends attribute `type` with `len` bytes of `data` at buf + *off (room is the caller's: a few names). */
static void put_attr(uint8_t *buf, size_t *off, uint16_t type, const void *data, size_t len) {
  struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type };
  memcpy(buf + *off, &a, sizeof a);
  memcpy(buf + *off + NLA_HDRLEN, data, len);
  memset(buf + *off + NLA_HDRLEN + len, 0, NLA_ALIGN(len) - len);
  *off += NLA_HDRLEN + NLA_ALIGN(len);
}

static uint64_t be64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
  return v;
}

/* The nf_tables family number of `family`, or -1 (said on stderr). */
static int family_number(const char *family) {
  int fam = !strcmp(family, "inet") ? 1 : !strcmp(family, "ip") ? 2 : !strcmp(family, "ip6") ? 10 : !strcmp(family, "arp") ? 3 : -1;
  if (fam < 0) fprintf(stderr, "lbd-nfbatch: family %s is not inet, ip, ip6 or arp\n", family);
  return fam;
}

/*
 * Sends one request and returns the kernel's answer to it, or NULL after printing `failed <why>`:
 * an error answer (its errno text), or none within 2 s.
 */
static const struct nlmsghdr *ask(int s, const uint8_t *req, size_t len) {
  const uint32_t seq = ((const struct nlmsghdr *)req)->nlmsg_seq;
  struct timeval tv = { .tv_sec = 2 };
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  if (sendto(s, req, len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) { printf("failed %s\n", strerror(errno)); return NULL; }
  static uint8_t buf[1 << 16];
  for (;;) {
    ssize_t got = recv(s, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) { printf("failed no answer from the kernel: %s\n", strerror(errno)); return NULL; }
    int left = (int)got;
    for (const struct nlmsghdr *m = (const struct nlmsghdr *)buf; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
      if (m->nlmsg_seq != seq) continue; /* a late answer to an earlier request */
      if (m->nlmsg_type == NLMSG_ERROR && m->nlmsg_len >= NLMSG_HDRLEN + 4) {
        int err;
        memcpy(&err, NLMSG_DATA(m), 4);
        printf("failed %s\n", strerror(-err));
        return NULL;
      }
      return m;
    }
  }
}

/* The request's header and nfgenmsg for `type` in family `fam`; returns the offset of its first attribute. */
static size_t start_request(uint8_t *req, int fam) {
  size_t off = NLMSG_HDRLEN;
  struct { uint8_t family, version; uint16_t res_id; } nfg = { (uint8_t)fam, 0, 0 };
  memcpy(req + off, &nfg, sizeof nfg);
  return off + sizeof nfg;
}

/* Each request its own sequence number, so that ask() never takes an answer to an earlier one. */
static uint32_t request_seq;

static void finish_request(uint8_t *req, size_t len, uint16_t type) {
  struct nlmsghdr h = { .nlmsg_len = (uint32_t)len, .nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = ++request_seq };
  memcpy(req, &h, sizeof h);
}

/* One read of a named counter: see the top of the file. */
static int counter_mode(int s, const char *family, const char *table, const char *name) {
  int fam = family_number(family);
  if (fam < 0) return 2;
  if (strlen(table) > 255 || strlen(name) > 255) { fprintf(stderr, "lbd-nfbatch: a table or counter name is longer than 255 bytes\n"); return 2; }
  static uint8_t req[1024];
  size_t off = start_request(req, fam);
  put_attr(req, &off, NFTA_OBJ_TABLE, table, strlen(table) + 1);
  put_attr(req, &off, NFTA_OBJ_NAME, name, strlen(name) + 1);
  uint32_t type = htonl(NFT_OBJECT_COUNTER);
  put_attr(req, &off, NFTA_OBJ_TYPE, &type, sizeof type);
  finish_request(req, off, NFT_MSG_GETOBJ);
  const struct nlmsghdr *m = ask(s, req, off);
  if (m == NULL) return 1;
  if (m->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ)) { printf("failed the answer is not an object\n"); return 1; }
  /* The object's attributes, then NFTA_OBJ_DATA's: the counter's packets and bytes, 64 bits in network order. */
  int have_packets = 0;
  uint64_t packets = 0, bytes = 0;
  const uint8_t *end = (const uint8_t *)m + m->nlmsg_len;
  for (const uint8_t *a = (const uint8_t *)NLMSG_DATA(m) + 4; a + NLA_HDRLEN <= end;) {
    const struct nlattr *at = (const struct nlattr *)a;
    if (at->nla_len < NLA_HDRLEN || a + at->nla_len > end) break;
    if ((at->nla_type & NLA_TYPE_MASK) == NFTA_OBJ_DATA) {
      const uint8_t *in_end = a + at->nla_len;
      for (const uint8_t *b = a + NLA_HDRLEN; b + NLA_HDRLEN <= in_end;) {
        const struct nlattr *bt = (const struct nlattr *)b;
        if (bt->nla_len < NLA_HDRLEN || b + bt->nla_len > in_end) break;
        if (bt->nla_len == NLA_HDRLEN + 8) {
          if ((bt->nla_type & NLA_TYPE_MASK) == NFTA_COUNTER_PACKETS) { packets = be64(b + NLA_HDRLEN); have_packets = 1; }
          if ((bt->nla_type & NLA_TYPE_MASK) == NFTA_COUNTER_BYTES) bytes = be64(b + NLA_HDRLEN);
        }
        b += NLA_ALIGN(bt->nla_len);
      }
    }
    a += NLA_ALIGN(at->nla_len);
  }
  if (!have_packets) { printf("failed the answer holds no packet count\n"); return 1; }
  printf("packets %llu bytes %llu\n", (unsigned long long)packets, (unsigned long long)bytes);
  return 0;
}

/* Whether a table exists: see the top of the file. */
static int table_mode(int s, const char *family, const char *table) {
  int fam = family_number(family);
  if (fam < 0) return 2;
  if (strlen(table) > 255) { fprintf(stderr, "lbd-nfbatch: a table name is longer than 255 bytes\n"); return 2; }
  static uint8_t req[512];
  size_t off = start_request(req, fam);
  put_attr(req, &off, NFTA_TABLE_NAME, table, strlen(table) + 1);
  finish_request(req, off, NFT_MSG_GETTABLE);
  const struct nlmsghdr *m = ask(s, req, off);
  if (m == NULL) return 1;
  if (m->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE)) { printf("failed the answer is not a table\n"); return 1; }
  printf("table\n");
  return 0;
}

int main(int argc, char **argv) {
  int counter = argc == 5 && !strcmp(argv[1], "counter");
  int table = argc >= 4 && argc % 2 == 0 && !strcmp(argv[1], "table");
  if (argc != 1 && !counter && !table) { fprintf(stderr, "usage: lbd-nfbatch < FRAMES | lbd-nfbatch counter FAMILY TABLE NAME | lbd-nfbatch table FAMILY TABLE [FAMILY TABLE]...\n"); return 2; }
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (s < 0) { perror("lbd-nfbatch: netlink socket"); return 1; }
  int one = 1;
  setsockopt(s, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one); /* errors without the request copied back */
  int rcvbuf = 16 << 20; /* every ack of a batch must fit */
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0) setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct timeval tv = { .tv_sec = 10 };
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("lbd-nfbatch: bind"); return 1; }
  if (counter) return counter_mode(s, argv[2], argv[3], argv[4]);
  if (table) {
    int all = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
      int r = table_mode(s, argv[i], argv[i + 1]);
      if (r == 2) return 2;
      all |= r;
    }
    return all;
  }

  uint8_t *batch = NULL;
  size_t cap = 0;
  for (;;) {
    uint32_t n;
    int r = read_exact((uint8_t *)&n, sizeof n);
    if (r == 0) return 0;
    if (r < 0) return 2;
    if (n > MAX_BATCH) { fprintf(stderr, "lbd-nfbatch: a frame of %u bytes is larger than %u\n", n, MAX_BATCH); return 2; }
    if (n > cap) {
      free(batch);
      cap = n;
      batch = malloc(cap);
      if (!batch) { perror("lbd-nfbatch: malloc"); return 1; }
    }
    if (read_exact(batch, n) != 1) return 2;
    int status = one_batch(s, batch, n);
    if (status >= 0) return status;
  }
}
