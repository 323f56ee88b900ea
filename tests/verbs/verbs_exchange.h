/* What the plain-C verbs test programs share: one line per check, the
   device's one QP over one buffer, and the swap of each side's QP number,
   rkey, buffer address and GID through files in a directory both processes
   see. */
#pragma once

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;

static int check(int ok, const char* what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  fflush(stdout);
  if (!ok) failures++;
  return ok;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int wait_for_file(const char* path, double seconds) {
  const double end = now_s() + seconds;
  while (access(path, F_OK) != 0) {
    if (now_s() > end) return 0;
    usleep(10000);
  }
  return 1;
}

struct Ends {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
  union ibv_gid gid;
};

/* Written to a temporary name and renamed, so that the peer never reads a
   half-written file. */
static int publish(const char* dir, const char* role, const struct Ends* e) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, role);
  snprintf(path, sizeof path, "%s/%s.ends", dir, role);
  FILE* f = fopen(tmp, "w");
  if (!f) return 0;
  fprintf(f, "%u %u %llu", e->qpn, e->rkey, (unsigned long long)e->addr);
  for (int i = 0; i < 16; i++) fprintf(f, " %u", e->gid.raw[i]);
  fprintf(f, "\n");
  fclose(f);
  return rename(tmp, path) == 0;
}

static int read_peer(const char* dir, const char* role, struct Ends* e) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.ends", dir, role);
  if (!wait_for_file(path, 60)) return 0;
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  unsigned long long addr = 0;
  int ok = fscanf(f, "%u %u %llu", &e->qpn, &e->rkey, &addr) == 3;
  for (int i = 0; ok && i < 16; i++) {
    unsigned v = 0;
    ok = fscanf(f, "%u", &v) == 1;
    e->gid.raw[i] = (uint8_t)v;
  }
  fclose(f);
  e->addr = addr;
  return ok;
}

/* The one device, opened, with a PD, a CQ, `buf` registered and a QP of
   `type` (`depth` WRs each way, one SGE) on that CQ. */
struct Setup {
  struct ibv_device** list;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_mr* mr;
  struct ibv_qp* qp;
};

static int open_one_qp(char* buf, size_t len, int access, enum ibv_qp_type type, uint32_t depth,
                       struct Setup* s) {
  memset(s, 0, sizeof *s);
  int n = 0;
  s->list = ibv_get_device_list(&n);
  if (!check(s->list != NULL && n == 1, "one device")) return 0;
  s->ctx = ibv_open_device(s->list[0]);
  if (!check(s->ctx != NULL, "ibv_open_device")) return 0;
  s->pd = ibv_alloc_pd(s->ctx);
  s->cq = s->pd ? ibv_create_cq(s->ctx, (int)(2 * depth), NULL, NULL, 0) : NULL;
  s->mr = s->cq ? ibv_reg_mr(s->pd, buf, len, access) : NULL;
  if (!check(s->mr != NULL, "PD, CQ and MR")) return 0;
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = s->cq;
  ia.recv_cq = s->cq;
  ia.cap.max_send_wr = depth;
  ia.cap.max_recv_wr = depth;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.qp_type = type;
  s->qp = ibv_create_qp(s->pd, &ia);
  return check(s->qp != NULL, "ibv_create_qp");
}

/* Everything open_one_qp made, destroyed in order. */
static int close_one_qp(struct Setup* s) {
  const int ok = ibv_destroy_qp(s->qp) == 0 && ibv_destroy_cq(s->cq) == 0 &&
                 ibv_dereg_mr(s->mr) == 0 && ibv_dealloc_pd(s->pd) == 0 &&
                 ibv_close_device(s->ctx) == 0;
  ibv_free_device_list(s->list);
  return ok;
}
