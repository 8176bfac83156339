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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_SNDBUFFORCE
#define SO_SNDBUFFORCE 32
#endif
#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif
#define NFNL_MSG_BATCH_BEGIN 0x10
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

int main(int argc, char **argv) {
  (void)argv;
  if (argc != 1) { fprintf(stderr, "usage: lbd-nfbatch < FRAMES\n"); return 2; }
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
