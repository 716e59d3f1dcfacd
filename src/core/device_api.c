/* NCCL's device API (ncclDevCommCreate and the team and resource functions the nccl_device headers declare), which
 * kernels written against NCCL use to address peers' memory from device code. DCCL has no such API: creating a
 * device communicator and the resource requirements are refused with the reason; the functions that return a
 * value, not a result, return the documented neutral values of docs/nccl-compat.md (the world team is every rank;
 * the load-store and rail teams are this rank alone). They exist so programs built against NCCL 2.28 load.
 * Also here: ncclResetDebugInitInternal, which NCCL exports beside ncclResetDebugInit (util/log.c). */
#include "core/comm.h"
#include "core/comm_registry.h"
#include "util/error.h"

/* NCCL's team: nRanks ranks, this rank's index among them, and the world-rank distance between neighbours. */
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;
/* Opaque to DCCL: only pointers to them cross the API. */
struct ncclDevCommRequirements;
struct ncclDevComm;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;

#define DCCL_EXPORT __attribute__((visibility("default")))

DCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs,
                                           struct ncclDevComm *out);
DCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *dev_comm);
DCCL_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm);
DCCL_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t comm);
DCCL_EXPORT ncclTeam_t ncclTeamRail(ncclComm_t comm);
DCCL_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
DCCL_EXPORT int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
DCCL_EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nbarriers,
                                                         struct ncclLsaBarrierHandle *out_handle,
                                                         struct ncclDevResourceRequirements *out_req);
DCCL_EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nbarriers,
                                                         struct ncclGinBarrierHandle *out_handle,
                                                         struct ncclDevResourceRequirements *out_req);
DCCL_EXPORT int ncclLLA2ACalcSlots(int max_elts, int max_elt_size);
DCCL_EXPORT ncclResult_t ncclLLA2ACreateRequirement(int nblocks, int nslots, struct ncclLLA2AHandle *out_handle,
                                                    struct ncclDevResourceRequirements *out_req);
DCCL_EXPORT void ncclResetDebugInitInternal(void);

static ncclResult_t refused(const char *call) {
  return dccl_error(ncclInvalidUsage,
                    "%s: NCCL's device API (device communicators, teams and their resources) is not supported by "
                    "DCCL; its collectives run from the host API",
                    call);
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs, struct ncclDevComm *out) {
  (void)comm, (void)reqs, (void)out;
  return refused("ncclDevCommCreate");
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *dev_comm) {
  (void)comm, (void)dev_comm;
  return refused("ncclDevCommDestroy");
}

/* A live communicator's size and rank; 1 and 0 for anything else (nothing to report an error through). */
static ncclTeam_t self_team(ncclComm_t comm, int world) {
  ncclTeam_t t = {1, 0, 1};
  if (world && dccl_comm_is_live(comm)) {
    t.nRanks = comm->nranks;
    t.rank = comm->rank;
  }
  return t;
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) { return self_team(comm, 1); }
ncclTeam_t ncclTeamLsa(ncclComm_t comm) { return self_team(comm, 0); }
ncclTeam_t ncclTeamRail(ncclComm_t comm) { return self_team(comm, 0); }

/* The world rank of a team's member: this rank's, moved by the stride. -1 outside the team or the world. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!dccl_comm_is_live(comm) || rank < 0 || rank >= team.nRanks) return -1;
  int world = comm->rank + (rank - team.rank) * team.stride;
  return world >= 0 && world < comm->nranks ? world : -1;
}

/* The load-store team is this rank alone: only it has an index there (0). */
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  int world = ncclTeamRankToWorld(comm, team, rank);
  return world >= 0 && world == comm->rank ? 0 : -1;
}

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nbarriers, struct ncclLsaBarrierHandle *out_handle,
                                             struct ncclDevResourceRequirements *out_req) {
  (void)team, (void)nbarriers, (void)out_handle, (void)out_req;
  return refused("ncclLsaBarrierCreateRequirement");
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nbarriers,
                                             struct ncclGinBarrierHandle *out_handle,
                                             struct ncclDevResourceRequirements *out_req) {
  (void)comm, (void)team, (void)nbarriers, (void)out_handle, (void)out_req;
  return refused("ncclGinBarrierCreateRequirement");
}

int ncclLLA2ACalcSlots(int max_elts, int max_elt_size) {
  (void)max_elts, (void)max_elt_size;
  return 0; /* no slots: the device all-to-all does not exist here */
}

ncclResult_t ncclLLA2ACreateRequirement(int nblocks, int nslots, struct ncclLLA2AHandle *out_handle,
                                        struct ncclDevResourceRequirements *out_req) {
  (void)nblocks, (void)nslots, (void)out_handle, (void)out_req;
  return refused("ncclLLA2ACreateRequirement");
}

void ncclResetDebugInitInternal(void) { ncclResetDebugInit(); }
