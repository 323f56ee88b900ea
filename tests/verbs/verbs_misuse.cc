/* An unmodified libibverbs program (plain C, linked against libibverbs.so.1) that
   asks libdroce-verbs for what droce does not implement and checks each
   refusal is EOPNOTSUPP or EINVAL, never a crash, and that what perftest
   relies on (relaxed ordering, the GID entry query) is accepted. Run by
   verbs_test.py under LD_PRELOAD; prints one line per check, exits 1 on a
   failure. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char* what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  check(list != NULL && n == 1, "one device");
  if (!list || n < 1) return 1;
  struct ibv_context* ctx = ibv_open_device(list[0]);
  check(ctx != NULL, "ibv_open_device");
  if (!ctx) return 1;
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  check(pd != NULL, "ibv_alloc_pd");
  static char buf[65536];

  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                     IBV_ACCESS_RELAXED_ORDERING);
  check(mr != NULL && mr->lkey != 0, "ibv_reg_mr with IBV_ACCESS_RELAXED_ORDERING");
  errno = 0;
  check(ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND) == NULL &&
            errno == EOPNOTSUPP,
        "on-demand paging: EOPNOTSUPP");
  errno = 0;
  check(ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL,
        "remote write without local write: EINVAL");
  errno = 0;
  check(ibv_alloc_mw(pd, IBV_MW_TYPE_1) == NULL && errno == EOPNOTSUPP,
        "memory windows: EOPNOTSUPP");

  struct ibv_gid_entry entry;
  check(ibv_query_gid_ex(ctx, 1, 1, &entry, 0) == 0 && entry.gid_type == IBV_GID_TYPE_ROCE_V2,
        "ibv_query_gid_ex: RoCE v2");
  check(ibv_query_gid_ex(ctx, 1, 15, &entry, 0) == ENODATA, "an empty GID entry: ENODATA");

  errno = 0;
  check(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL, "a CQ of 0: EINVAL");
  struct ibv_cq* cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  check(cq != NULL, "ibv_create_cq");
  check(ibv_resize_cq(cq, 128) == EOPNOTSUPP, "ibv_resize_cq: EOPNOTSUPP");

  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.qp_type = IBV_QPT_RAW_PACKET;
  errno = 0;
  check(ibv_create_qp(pd, &ia) == NULL && errno == EOPNOTSUPP, "a raw packet QP: EOPNOTSUPP");
  ia.qp_type = IBV_QPT_RC;
  struct ibv_qp* qp = ibv_create_qp(pd, &ia);
  check(qp != NULL && qp->qp_num >= 2, "ibv_create_qp RC");
  if (!qp) return 1;

  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == EINVAL,
        "RESET->INIT without the P_Key index: EINVAL");
  check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH) == EOPNOTSUPP,
        "alternate paths: EOPNOTSUPP");
  a.cap.max_send_wr = 1024;
  check(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
                          IBV_QP_CAP) == EINVAL,
        "resizing the queues (IBV_QP_CAP): EINVAL, as from a kernel provider");
  check(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "RESET->INIT");
  a.port_num = 2;
  a.qp_state = IBV_QPS_INIT;
  check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT) == EINVAL, "port 2: EINVAL");

  struct ibv_sge sge = {(uintptr_t)buf, 64, mr ? mr->lkey : 0};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_LOCAL_INV;
  check(ibv_post_send(qp, &wr, &bad) == EOPNOTSUPP && bad == &wr, "local invalidate: EOPNOTSUPP");
  wr.opcode = IBV_WR_RDMA_WRITE;
  check(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr,
        "posting before RTS: EINVAL (IBA 10.3.1)");
  check(ibv_qp_to_qp_ex(qp) == NULL, "no extended QP (ibv_wr_*)");
  check(ibv_attach_mcast(qp, &entry.gid, 0) == EOPNOTSUPP, "multicast: EOPNOTSUPP");

  check(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
  check(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
  check(mr && ibv_dereg_mr(mr) == 0, "ibv_dereg_mr");
  check(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
  check(ibv_close_device(ctx) == 0, "ibv_close_device");
  ibv_free_device_list(list);
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
