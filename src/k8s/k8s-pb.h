/*
 * Packing a protobuf-c message into a malloc'd buffer, the form the gRPC
 * module takes replies in.
 */
#ifndef K8S_PB_H
#define K8S_PB_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <protobuf-c/protobuf-c.h>

/* 0 with *out (malloc'd) and *len, or -ENOMEM. */
static inline int k8s_pb_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(m);
	*out = malloc(*len ? *len : 1);
	if (!*out)
		return -ENOMEM;
	protobuf_c_message_pack(m, *out);
	return 0;
}

#endif
