/* What the plain-C verbs test programs share: one line per check, and the
   swap of each side's QP number, rkey, buffer address and GID through files
   in a directory both processes see. */
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
