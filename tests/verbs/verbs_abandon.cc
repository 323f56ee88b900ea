/* An unmodified libibverbs program (plain C, linked against libibverbs.so.1)
   whose one side exits without cleaning up: what a crashing or careless
   application does to its peer. Two processes, each `verbs_abandon ROLE DIR`:
   they swap their QP's number, GID and buffer through files in DIR, connect
   an RC QP and the stayer writes once into the leaver's buffer. Then

   - the leaver checks the bytes and calls exit(0) with its QP, CQ, MR, PD
     and device still open (libdroce-verbs stops the engine and closes the
     port from its destructor);
   - the stayer, once DIR/gone exists (the test writes it after the leaver
     has exited), writes again: as with a NIC whose peer went away, the
     write completes with IBV_WC_RETRY_EXC_ERR (IBA 9.7.6.1.3: the retry
     count ran out) and the QP is in the error state.

   Prints one line per check, exits 1 on a failure. Run by
   ibverbs_utils_test.py under LD_PRELOAD, the leaver under valgrind where
   it is installed (no leak of its own at exit). */
#include <stdlib.h>

#include "verbs_exchange.h"

static int to_rts(struct ibv_qp* qp, const struct Ends* peer) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return 0;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer->qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return 0;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  /* 4.096 us * 2^16: about 270 ms a try, room for a peer run under
     valgrind; four tries, about a second, once the peer is gone. */
  a.timeout = 16;
  a.retry_cnt = 3;
  a.rnr_retry = 2;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

/* One signalled RDMA WRITE of `len` bytes; its completion's status, or -1
   when none came within `seconds`. */
static int write_once(struct ibv_qp* qp, struct ibv_cq* cq, struct ibv_mr* mr, char* buf,
                      uint32_t len, const struct Ends* peer, double seconds) {
  struct ibv_sge sge = {(uintptr_t)buf, len, mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer->addr;
  wr.wr.rdma.rkey = peer->rkey;
  if (ibv_post_send(qp, &wr, &bad)) return -2;
  const double end = now_s() + seconds;
  struct ibv_wc wc;
  while (now_s() < end) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) return -3;
    if (n == 1) return (int)wc.status;
    usleep(100);
  }
  return -1;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "leaver") != 0 && strcmp(argv[1], "stayer") != 0)) {
    fprintf(stderr, "usage: verbs_abandon leaver|stayer DIR\n");
    return 2;
  }
  const int leaver = strcmp(argv[1], "leaver") == 0;
  const char* dir = argv[2];
  enum { kLen = 4096 };
  static char buf[kLen];

  struct Setup st;
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (!open_one_qp(buf, kLen, access, IBV_QPT_RC, 4, &st)) return 1;
  struct ibv_context* ctx = st.ctx;
  struct ibv_cq* cq = st.cq;
  struct ibv_mr* mr = st.mr;
  struct ibv_qp* qp = st.qp;

  struct Ends me, peer;
  memset(&me, 0, sizeof me);
  me.qpn = qp->qp_num;
  me.rkey = mr->rkey;
  me.addr = (uintptr_t)buf;
  if (!check(ibv_query_gid(ctx, 1, 1, &me.gid) == 0, "ibv_query_gid 1")) return 1;
  if (!check(publish(dir, argv[1], &me), "published this side's QP")) return 1;
  if (!check(read_peer(dir, leaver ? "stayer" : "leaver", &peer), "read the peer's QP"))
    return 1;
  if (!check(to_rts(qp, &peer), "RESET->INIT->RTR->RTS")) return 1;

  char path[512];
  /* The stayer writes only once the leaver's QP can take it (RTR). */
  snprintf(path, sizeof path, "%s/ready", dir);
  if (leaver) {
    FILE* ready = fopen(path, "w");
    if (ready) fclose(ready);
  } else if (!check(wait_for_file(path, 60), "the leaver is ready")) {
    return 1;
  }
  snprintf(path, sizeof path, "%s/wrote", dir);
  if (leaver) {
    if (!check(wait_for_file(path, 60), "the stayer wrote")) return 1;
    int pattern = 1;
    for (int i = 0; i < kLen; i++) pattern &= buf[i] == (char)(i * 7 + 1);
    check(pattern, "the write's bytes arrived");
    fflush(stdout);
    /* No ibv_destroy_qp, ibv_destroy_cq, ibv_dereg_mr, ibv_dealloc_pd,
       ibv_close_device or ibv_free_device_list. */
    exit(failures ? 1 : 0);
  }

  for (int i = 0; i < kLen; i++) buf[i] = (char)(i * 7 + 1);
  const int first = write_once(qp, cq, mr, buf, kLen, &peer, 20);
  if (!check(first == IBV_WC_SUCCESS, "a write while the peer is there: IBV_WC_SUCCESS"))
    printf("its status: %d\n", first);
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
  snprintf(path, sizeof path, "%s/gone", dir);
  if (!check(wait_for_file(path, 60), "the leaver exited")) return 1;
  const int status = write_once(qp, cq, mr, buf, kLen, &peer, 30);
  printf("status after the peer left: %d (%s)\n", status,
         status >= 0 ? ibv_wc_status_str((enum ibv_wc_status)status) : "no completion");
  check(status == IBV_WC_RETRY_EXC_ERR,
        "a write after the peer left: IBV_WC_RETRY_EXC_ERR, as from a NIC");
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qia;
  check(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia) == 0 && qa.qp_state == IBV_QPS_ERR,
        "the QP is in the error state");
  check(close_one_qp(&st), "the stayer cleans up");
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
