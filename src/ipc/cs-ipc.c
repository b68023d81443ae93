/* libcuslice <-> cusliced messages (see cs-ipc.h). */
#include "cs-ipc.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cs-group.h"

_Static_assert(CS_IPC_NAME == CS_GROUP_NAME_MAX + 1, "group names fit");

size_t cs_ipc_body_size(uint32_t type)
{
	switch (type) {
#define X(t, value, body, sender)                                                                  \
	case CS_IPC_##t:                                                                           \
		return sizeof(struct body);
#include "cuslice/ipc-messages.def"
#undef X
	default:
		return 0;
	}
}

const char *cs_ipc_type_name(uint32_t type)
{
	switch (type) {
#define X(t, value, body, sender)                                                                  \
	case CS_IPC_##t:                                                                           \
		return #t;
#include "cuslice/ipc-messages.def"
#undef X
	default:
		return "unknown";
	}
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * Bodies travel as the structs' bytes: every supported target is
 * little-endian (checked here), and the structs have no padding.
 */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian wire format");

size_t cs_ipc_encode(enum cs_ipc_type type, uint32_t seq, const void *body, void *buf,
		     size_t size)
{
	size_t n = cs_ipc_body_size(type);
	unsigned char *p = buf;

	if (n == 0 || size < CS_IPC_HEADER + n)
		return 0;
	memcpy(p, CS_IPC_MAGIC, 4);
	put16(p + 4, (uint16_t)type);
	put16(p + 6, 0);
	put32(p + 8, (uint32_t)n);
	put32(p + 12, seq);
	memcpy(p + CS_IPC_HEADER, body, n);
	return CS_IPC_HEADER + n;
}

/* True when field[0..len) holds a NUL. */
static int terminated(const char *field, size_t len)
{
	return memchr(field, '\0', len) != NULL;
}

static int valid_body(const struct cs_ipc_msg *m)
{
	switch (m->h.type) {
	case CS_IPC_REGISTER:
		return terminated(m->u.reg.group, sizeof(m->u.reg.group)) &&
		       terminated(m->u.reg.token, sizeof(m->u.reg.token)) &&
		       (m->u.reg.group[0] == '\0' || cs_group_name_valid(m->u.reg.group));
	case CS_IPC_REGISTERED:
		return terminated(m->u.ok.group, sizeof(m->u.ok.group)) &&
		       cs_group_name_valid(m->u.ok.group) && m->u.ok.slot < CS_GROUP_MAX_PROCS &&
		       m->u.ok.priority < CS_PRIORITY_COUNT;
	case CS_IPC_DENIED:
		return terminated(m->u.denied.reason, sizeof(m->u.denied.reason));
	default:
		return 1;
	}
}

long cs_ipc_decode(const void *buf, size_t len, struct cs_ipc_msg *msg)
{
	const unsigned char *p = buf;
	size_t want, have = len < 4 ? len : 4;

	/* A wrong magic is wrong as soon as its first differing byte arrives. */
	if (memcmp(p, CS_IPC_MAGIC, have) != 0)
		return -EPROTO;
	if (len < CS_IPC_HEADER)
		return 0;
	msg->h.type = get16(p + 4);
	msg->h.flags = get16(p + 6);
	msg->h.length = get32(p + 8);
	msg->h.seq = get32(p + 12);
	want = cs_ipc_body_size(msg->h.type);
	if (want == 0 || msg->h.flags != 0 || msg->h.length != want ||
	    msg->h.length > CS_IPC_MAX_BODY)
		return -EPROTO;
	if (len < CS_IPC_HEADER + want)
		return 0;
	memcpy(&msg->u, p + CS_IPC_HEADER, want);
	if (!valid_body(msg))
		return -EPROTO;
	return (long)(CS_IPC_HEADER + want);
}

long cs_ipc_send_fds(int sock, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(CS_IPC_MAX_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > CS_IPC_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : (long)n;
}

/* Stores fd in the first free (-1) entry of fds; false when all are taken. */
static bool keep(int fds[CS_IPC_MAX_FDS], int fd)
{
	for (unsigned i = 0; i < CS_IPC_MAX_FDS; i++) {
		if (fds[i] < 0) {
			fds[i] = fd;
			return true;
		}
	}
	return false;
}

long cs_ipc_recv_fds(int sock, void *buf, size_t len, int fds[CS_IPC_MAX_FDS], unsigned *extra)
{
	/* Room for a few: a peer sending more must not have them leak into us unseen. */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	ssize_t n;

	do
		n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (!keep(fds, got)) {
				close(got);
				(*extra)++;
			}
		}
	}
	/* Descriptors the kernel dropped for want of room count as extra too. */
	if (mh.msg_flags & MSG_CTRUNC)
		(*extra)++;
	return (long)n;
}
