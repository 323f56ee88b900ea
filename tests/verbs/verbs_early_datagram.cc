/* An unmodified libibverbs program (plain C, linked against libibverbs.so.1)
   that sends a UD datagram before its port's link is up: a program does
   not wait for its peer's port, only for the peer's address. Two
   processes, each `verbs_early_datagram ROLE DIR`, swap their QP's number
   and GID through files in DIR:

   - the receiver (the memif server) posts a receive, publishes its QP and
     waits up to 30 s for one datagram, then checks its bytes, writes
     DIR/got and stays until DIR/sender.gone appears (the test writes it
     once the sender has exited);
   - the sender (the memif client) sends one datagram as soon as it has the
     receiver's QP, writes DIR/posted, and stays until DIR/got appears.

   The test stops the receiver (SIGSTOP) before the sender starts, so that
   the memif handshake cannot finish, and continues it once the datagram is
   posted: the sender's link comes up only then. A NIC holds a frame until
   its link is up; UD has no retransmission, so a frame discarded then would
   never arrive.

   The two leave one after the other, the receiver idle when the sender's
   port closes: DPDK's memif handles a peer's disconnect on its interrupt
   thread and unmaps the rings without waiting for a burst in progress on
   the port (docs/ENGINE.md "A memif peer leaving"), and two programs exiting at once,
   one still sending, crashed the one sending about once in 25 runs on a
   loaded machine.

   Prints one line per check, exits 1 on a failure. Run by
   ibverbs_utils_test.py under LD_PRELOAD. */
#include <stdlib.h>

#include "verbs_exchange.h"

enum { kLen = 256, kGrh = 40, kQkey = 0x11111111 };

static int to_rts_ud(struct ibv_qp* qp, int send) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = kQkey;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return 0;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return 0;
  if (!send) return 1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
}

/* The first completion within `seconds`: its status, or -1 for none. */
static int wait_completion(struct ibv_cq* cq, double seconds, struct ibv_wc* wc) {
  const double end = now_s() + seconds;
  while (now_s() < end) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return -2;
    if (n == 1) return (int)wc->status;
    usleep(200);
  }
  return -1;
}

static void touch(const char* dir, const char* name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
}

static int receive(struct ibv_qp* qp, struct ibv_cq* cq, struct ibv_mr* mr, char* buf,
                   const char* dir) {
  struct ibv_sge sge = {(uintptr_t)buf, kGrh + kLen, mr->lkey};
  struct ibv_recv_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (!check(ibv_post_recv(qp, &wr, &bad) == 0, "a receive posted")) return 0;
  struct Ends me;
  memset(&me, 0, sizeof me);
  me.qpn = qp->qp_num;
  if (!check(ibv_query_gid(qp->context, 1, 1, &me.gid) == 0 && publish(dir, "receiver", &me),
             "published the receiver's QP"))
    return 0;
  struct ibv_wc wc;
  const int status = wait_completion(cq, 30, &wc);
  if (!check(status == IBV_WC_SUCCESS && wc.byte_len == kGrh + kLen,
             "the datagram sent before the sender's link was up arrived"))
    return 0;
  int pattern = 1;
  for (int i = 0; i < kLen; i++) pattern &= buf[kGrh + i] == (char)(i * 5 + 3);
  if (!check(pattern, "its bytes")) return 0;
  touch(dir, "got");
  char path[512];
  snprintf(path, sizeof path, "%s/sender.gone", dir);
  return check(wait_for_file(path, 60), "the sender gone first");
}

static int send_early(struct ibv_pd* pd, struct ibv_qp* qp, struct ibv_cq* cq, struct ibv_mr* mr,
                      char* buf, const char* dir) {
  struct Ends peer;
  if (!check(read_peer(dir, "receiver", &peer), "read the receiver's QP")) return 0;
  struct ibv_ah_attr aa;
  memset(&aa, 0, sizeof aa);
  aa.is_global = 1;
  aa.grh.dgid = peer.gid;
  aa.grh.sgid_index = 1;
  aa.grh.hop_limit = 64;
  aa.port_num = 1;
  struct ibv_ah* ah = ibv_create_ah(pd, &aa);
  if (!check(ah != NULL, "ibv_create_ah")) return 0;
  for (int i = 0; i < kLen; i++) buf[i] = (char)(i * 5 + 3);
  struct ibv_sge sge = {(uintptr_t)buf, kLen, mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = peer.qpn;
  wr.wr.ud.remote_qkey = kQkey;
  if (!check(ibv_post_send(qp, &wr, &bad) == 0, "the datagram posted at once")) return 0;
  touch(dir, "posted");
  struct ibv_wc wc;
  check(wait_completion(cq, 30, &wc) == IBV_WC_SUCCESS, "its send completion");
  char path[512];
  snprintf(path, sizeof path, "%s/got", dir);
  check(wait_for_file(path, 60), "the receiver got it");
  return ibv_destroy_ah(ah) == 0;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "receiver") != 0 && strcmp(argv[1], "sender") != 0)) {
    fprintf(stderr, "usage: verbs_early_datagram receiver|sender DIR\n");
    return 2;
  }
  const int sender = strcmp(argv[1], "sender") == 0;
  static char buf[kGrh + kLen];
  struct Setup st;
  if (!open_one_qp(buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE, IBV_QPT_UD, 2, &st)) return 1;
  if (!check(to_rts_ud(st.qp, sender), "the UD QP ready to send and receive")) return 1;
  if (sender)
    send_early(st.pd, st.qp, st.cq, st.mr, buf, argv[2]);
  else
    receive(st.qp, st.cq, st.mr, buf, argv[2]);
  check(close_one_qp(&st), "cleaned up");
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
