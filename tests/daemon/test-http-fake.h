/*
 * A made-up daemon engine for the HTTP side's unit tests: implements the engine's
 * half of cusliced.h (cd_snapshot, cd_events, cd_policy_*, cd_peer_of_fd,
 * cd_token_ok, cd_refused, cd_http_closed) over the global `fake`, which each test sets up
 * with fake_reset().
 */
#ifndef TEST_HTTP_FAKE_H
#define TEST_HTTP_FAKE_H

#include <pthread.h>

#include "cusliced.h"

#define FAKE_GROUPS_MAX 8
#define FAKE_EVENTS_MAX 8

/* Numbers of the made-up node, used by the tests' expectations. */
#define FAKE_GPU0_UUID "GPU-11111111-2222-3333-4444-555555555555"
#define FAKE_GPU1_UUID "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
#define FAKE_GIB (1024ull * 1024 * 1024)

struct fake {
	pthread_mutex_t lock;	/* the server tests call in from MHD's thread */
	struct cd_config config;
	struct cd_snapshot snap;	/* the template cd_snapshot deep-copies */
	struct cd_snap_gpu gpus[2];
	struct cd_snap_group groups[FAKE_GROUPS_MAX];
	char policies[FAKE_GROUPS_MAX][512];
	struct cd_snap_proc procs[2];
	struct cd_snap_sched sched[1];	/* GPU 0's scheduler */
	struct cd_event events[FAKE_EVENTS_MAX];
	unsigned nevents;
	int snapshot_rc;	/* < 0: cd_snapshot fails with it */
	int put_rc;		/* < 0: cd_policy_put fails with it and put_err */
	char put_err[128];
	char put_name[64];	/* last cd_policy_put */
	char put_body[512];
	enum cd_put_mode put_mode;	/* the last cd_policy_put's (the fake stores the body either way) */
	bool peer_known;	/* cd_peer_of_fd's answer */
	struct cd_peer peer;
	char token[64];		/* "" = none configured */
	uid_t actor;		/* cd_event_actor's last value */
	uid_t put_actor;	/* its value during the last cd_policy_put */
	unsigned closed;	/* cd_http_closed calls */
	int closed_fd;		/* the last one's fd */
	unsigned refused;	/* cd_refused calls */
	char refused_why[128];
};

extern struct fake fake;

/*
 * The made-up node: GPU 0 (H100, 80 GiB) and GPU 1 (A100, 40 GiB); group
 * "train" managed (4 GiB limit and 30% burst core limit on GPU 0, no limits
 * on GPU 1, 2 processes), group "pid-42" unmanaged (no limits, 1 process);
 * processes 42 (registered, pid-42) and 77 (bypass, stopped); events 1..3;
 * GPU 0 serialized by its scheduler: "train" holds it (epoch 7, quantum
 * 2.5 s), "pid-42" queued with 3 launches waiting; switches of 10 and 20 ms.
 * An authorized peer on the admin socket, no token.
 */
void fake_reset(void);

#endif
