/*
 * Canned replies of cusliced's API (the shapes of docs: Issue 6 HTTP API),
 * shared by the rendering tests and the fake daemon.
 */
#ifndef CANNED_H
#define CANNED_H

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define UUID1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

static const char canned_status[] =
    "{\"version\":\"0.1.0\",\"pid\":4242,\"uptime_seconds\":3723.5,"
    "\"socket\":\"/run/cuslice/cusliced.sock\",\"state_dir\":\"/var/lib/cuslice\","
    "\"shm_dir\":\"/dev/shm\",\"metrics_listen\":\"127.0.0.1:10463\","
    "\"groups\":2,\"processes\":4,\"gpus\":2,"
    "\"nvml\":{\"up\":false,\"attempts\":3,\"since\":1700000000,"
    "\"reason\":\"libnvidia-ml.so.1 does not load\",\"next_try\":1700000004}}";

static const char canned_gpus[] =
    "{\"gpus\":["
    "{\"index\":0,\"uuid\":\"" UUID0 "\",\"name\":\"NVIDIA H100 80GB HBM3\","
    "\"memory_total\":85899345920,\"memory_used\":6442450944,\"utilization\":37},"
    "{\"index\":1,\"uuid\":\"" UUID1 "\",\"name\":\"NVIDIA A100-SXM4-40GB\","
    "\"memory_total\":42949672960,\"memory_used\":0,\"utilization\":0}]}";

#define CANNED_GROUP_TRAIN                                                                         \
	"{\"name\":\"train\",\"managed\":true,"                                                    \
	"\"policy\":{\"memory_limit\":8589934592,\"core_limit\":30,\"mode\":\"hard\","             \
	"\"members\":{\"uids\":[1000]},"                                                           \
	"\"labels\":{\"k8s.namespace\":\"team-a\",\"k8s.pod\":\"web-0\"},"                           \
	"\"priority\":\"best-effort\"},"                                                          \
	"\"processes\":2,\"devices\":[{\"uuid\":\"" UUID0 "\",\"memory_used\":4294967296,"         \
	"\"memory_limit\":8589934592,\"core_limit\":30,\"core_used\":29.54,\"mode\":\"hard\","     \
	"\"oom_denials\":3,\"throttled_seconds\":12.5}]}"

static const char canned_group_train[] = CANNED_GROUP_TRAIN;

static const char canned_groups[] =
    "{\"groups\":[" CANNED_GROUP_TRAIN ","
    "{\"name\":\"pid-777\",\"managed\":false,\"policy\":null,\"processes\":1,\"devices\":["
    "{\"uuid\":\"" UUID0 "\",\"memory_used\":1073741824,\"memory_limit\":null,"
    "\"core_limit\":null,\"core_used\":5,\"mode\":\"hard\",\"oom_denials\":0,"
    "\"throttled_seconds\":0},"
    "{\"uuid\":\"" UUID1 "\",\"memory_used\":536870912,\"memory_limit\":null,"
    "\"core_limit\":12.5,\"core_used\":0,\"mode\":\"burst\",\"oom_denials\":0,"
    "\"throttled_seconds\":0}]}]}";

static const char canned_processes[] =
    "{\"processes\":["
    "{\"pid\":1001,\"name\":\"python3\",\"group\":\"train\",\"uid\":1000,\"registered\":true,\"cgroup\":\"/user.slice\","
    "\"gpus\":[{\"uuid\":\"" UUID0 "\",\"memory_used\":3221225472}],\"state\":\"running\"},"
    "{\"pid\":1002,\"name\":\"python3\",\"group\":\"train\",\"uid\":1000,\"registered\":true,\"cgroup\":\"/\","
    "\"gpus\":[{\"uuid\":\"" UUID0 "\",\"memory_used\":1073741824}],\"state\":\"running\"},"
    "{\"pid\":777,\"name\":\"worker\",\"group\":\"pid-777\",\"uid\":0,\"registered\":true,\"cgroup\":\"/\","
    "\"gpus\":[{\"uuid\":\"" UUID0 "\",\"memory_used\":1073741824},"
    "{\"uuid\":\"" UUID1 "\",\"memory_used\":536870912}],\"state\":\"stopped\"},"
    "{\"pid\":999,\"name\":\"miner\",\"group\":\"\",\"uid\":0,\"registered\":false,\"cgroup\":\"/\","
    "\"gpus\":[{\"uuid\":\"GPU-99999999-0000-0000-0000-000000000000\","
    "\"memory_used\":268435456}],\"state\":\"running\"}]}";

/* `cuslice ps` of canned_processes, canned_groups and canned_gpus. */
static const char canned_ps_table[] =
    "GROUP    PID NAME    GPU                                        MEM-USED MEM-LIMIT CORES "
    "CORE-LIMIT STATE\n"
    "train   1001 python3 0                                          3.00 GiB  8.00 GiB 29.5% "
    "       30% running\n"
    "train   1002 python3 0                                          1.00 GiB  8.00 GiB 29.5% "
    "       30% running\n"
    "pid-777  777 worker  0                                          1.00 GiB         -  5.0% "
    "         - stopped\n"
    "pid-777  777 worker  1                                        512.00 MiB         -  0.0% "
    "     12.5% stopped\n"
    "-        999 miner   GPU-99999999-0000-0000-0000-000000000000 256.00 MiB         -     - "
    "         - running,unregistered\n";

/* GET /v1/self?group=train (the registration socket): a member of a managed group. */
static const char canned_self_member[] =
    "{\"peer\":{\"pid\":4321,\"uid\":1000,\"gid\":1000,\"cgroup\":\"/user.slice/u\","
    "\"pod\":null},\"placement\":{\"asked\":\"train\",\"group\":\"train\",\"managed\":true,"
    "\"how\":\"member\",\"message\":\"group train is managed and its members rules name you: "
    "its policy applies\"},\"group\":" CANNED_GROUP_TRAIN "}";

/* GET /v1/self?group=secret: not a member. */
static const char canned_self_refused[] =
    "{\"peer\":{\"pid\":4321,\"uid\":1000,\"gid\":1000,\"cgroup\":\"/user.slice/u\","
    "\"pod\":null},\"placement\":{\"asked\":\"secret\",\"group\":null,\"managed\":false,"
    "\"how\":\"refused\",\"message\":\"group secret: pid 4321 (uid 1000, cgroup /user.slice/u) "
    "is not a member: such a process is refused (it fails closed)\"},\"group\":null}";

/* GET /v1/self?group=mine: no policy. */
static const char canned_self_unmanaged[] =
    "{\"peer\":{\"pid\":4321,\"uid\":1000,\"gid\":1000,\"cgroup\":\"/user.slice/u\","
    "\"pod\":\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\"},\"placement\":{\"asked\":\"mine\","
    "\"group\":\"mine\",\"managed\":false,\"how\":\"unmanaged\",\"message\":\"group mine has "
    "no policy: your processes share it on the limits of their environment\"},\"group\":null}";

#endif
