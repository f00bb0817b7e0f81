/*
 * openverbs: building RDMA_VERBS_IOCTL commands, for providers.
 *
 * Layout fixed by IBVERBS_PRIVATE_34 (rdma-core 44). A command is built on
 * the stack in one or more `struct ibv_command_buffer`s: a header naming the
 * uverbs object and method, followed by an array of `struct ib_uverbs_attr`
 * (16 bytes each, kernel uapi <rdma/rdma_user_ioctl_cmds.h>). Providers add
 * their own attributes to a buffer and pass it to a library `ibv_cmd_*`
 * function as a `link`; the library appends the linked buffers' attributes to
 * its own before calling execute_ioctl(). The helpers below are compiled into
 * providers, so their behaviour is part of the ABI.
 */
#ifndef INFINIBAND_CMD_IOCTL_H
#define INFINIBAND_CMD_IOCTL_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Value of uhw_in_idx / uhw_out_idx when no UHW attribute was added. */
#define _UHW_NO_INDEX 0xFF

/*
 * One command buffer. `hdr` must be last: its attrs[] continue into the
 * storage that DECLARE_COMMAND_BUFFER reserves after the structure.
 */
struct ibv_command_buffer {
	struct ibv_command_buffer *next;   /* linked (provider) buffer or NULL */
	struct ib_uverbs_attr *next_attr;  /* where the next attribute goes */
	struct ib_uverbs_attr *last_attr;  /* one past the reserved attributes */
	/* Index in hdr.attrs of the UHW_IN / UHW_OUT attribute, or _UHW_NO_INDEX. */
	uint8_t uhw_in_idx;
	uint8_t uhw_out_idx;
	/* Space (in 4-byte words) kept free before the UHW buffers so that the
	 * write() fallback can build its request in place. */
	uint8_t uhw_in_headroom_dwords;
	uint8_t uhw_out_headroom_dwords;
	/* An attribute could not be encoded (e.g. longer than 64 KiB). */
	uint8_t buffer_error : 1;
	/* The write() fallback must use the extended command format. */
	uint8_t fallback_require_ex : 1;
	/* The command has no write() equivalent. */
	uint8_t fallback_ioctl_only : 1;
	struct ib_uverbs_ioctl_hdr hdr;
};

/* Send a command (and the attributes of its linked buffers). Returns 0 or
 * an errno value; the kernel's errno is passed through unchanged. */
int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd);

/* Number of attributes the final buffer needs: num_attrs plus every
 * attribute already added to the buffers chained from `link`. */
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
				     struct ibv_command_buffer *link);

/* How many command_buffer-sized blocks hold a buffer with n attributes. */
#define _IOCTL_NUM_CMDB(_num_attrs)                                            \
	((sizeof(struct ibv_command_buffer) +                                  \
	  sizeof(struct ib_uverbs_attr) * (_num_attrs) +                       \
	  sizeof(struct ibv_command_buffer) - 1) /                             \
	 sizeof(struct ibv_command_buffer))

/* With a link that is a compile-time NULL the count is a constant. */
#define _ioctl_final_num_attrs(_num_attrs, _link)                              \
	((__builtin_constant_p(!(_link)) && !(_link))                          \
		 ? (_num_attrs)                                                \
		 : __ioctl_final_num_attrs(_num_attrs, _link))

static inline int _ioctl_init_cmdb(struct ibv_command_buffer *cmd,
				   uint16_t object_id, uint16_t method_id,
				   size_t num_attrs,
				   struct ibv_command_buffer *link)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->hdr.object_id = object_id;
	cmd->hdr.method_id = method_id;
	cmd->next = link;
	cmd->uhw_in_idx = _UHW_NO_INDEX;
	cmd->uhw_out_idx = _UHW_NO_INDEX;
	cmd->next_attr = cmd->hdr.attrs;
	cmd->last_attr = cmd->hdr.attrs + num_attrs;
	return 0;
}

/*
 * DECLARE_COMMAND_BUFFER_LINK(name, object, method, n, link) declares a
 * stack buffer `name` with room for n attributes plus those of `link`.
 */
#define DECLARE_COMMAND_BUFFER_LINK(_name, _object_id, _method_id, _num_attrs, \
				    _link)                                     \
	const unsigned int __##_name##total =                                  \
		_ioctl_final_num_attrs(_num_attrs, _link);                     \
	struct ibv_command_buffer _name[_IOCTL_NUM_CMDB(__##_name##total)];    \
	int __attribute__((unused)) __##_name##dummy = _ioctl_init_cmdb(       \
		_name, _object_id, _method_id, __##_name##total, _link)

#define DECLARE_COMMAND_BUFFER(_name, _object_id, _method_id, _num_attrs)      \
	DECLARE_COMMAND_BUFFER_LINK(_name, _object_id, _method_id, _num_attrs, \
				    NULL)

/* A pointer as the kernel's 64-bit attribute value. */
static inline uint64_t ioctl_ptr_to_u64(const void *ptr)
{
	return (uint64_t)(uintptr_t)ptr;
}

/* On 32-bit systems clear the upper half of a pointer-sized output. */
static inline void _scrub_ptr_attr(void **ptr)
{
#if UINTPTR_MAX != UINT64_MAX
	memset((char *)ptr + sizeof(*ptr), 0, sizeof(uint64_t) - sizeof(*ptr));
#else
	(void)ptr;
#endif
}

/* Reserve the next attribute (mandatory unless attr_optional() is used). */
static inline struct ib_uverbs_attr *
_ioctl_next_attr(struct ibv_command_buffer *cmd, uint16_t attr_id)
{
	struct ib_uverbs_attr *attr;

	assert(cmd->next_attr < cmd->last_attr);
	attr = cmd->next_attr++;
	memset(attr, 0, sizeof(*attr));
	attr->attr_id = attr_id;
	attr->flags = UVERBS_ATTR_F_MANDATORY;
	return attr;
}

/* Let the kernel ignore an attribute it does not know. */
static inline struct ib_uverbs_attr *
attr_optional(struct ib_uverbs_attr *attr)
{
	if (attr)
		attr->flags &= ~UVERBS_ATTR_F_MANDATORY;
	return attr;
}

/* An object handle (IDR) given to the kernel; its value travels in data. */
static inline struct ib_uverbs_attr *
fill_attr_in_obj(struct ibv_command_buffer *cmd, uint16_t attr_id, uint32_t idr)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);

	attr->data = idr;
	return attr;
}

/* An object the kernel creates; read its handle with read_attr_obj(). */
static inline struct ib_uverbs_attr *
fill_attr_out_obj(struct ibv_command_buffer *cmd, uint16_t attr_id)
{
	return fill_attr_in_obj(cmd, attr_id, 0);
}

static inline uint32_t read_attr_obj(uint16_t attr_id,
				     struct ib_uverbs_attr *attr)
{
	assert(attr->attr_id == attr_id);
	(void)attr_id;
	return (uint32_t)attr->data;
}

/* Input data: up to 8 bytes travel inline, longer data by pointer. */
static inline struct ib_uverbs_attr *
fill_attr_in(struct ibv_command_buffer *cmd, uint16_t attr_id,
	     const void *data, size_t len)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);

	if (len > UINT16_MAX)
		cmd->buffer_error = 1;
	attr->len = (uint16_t)len;
	if (len <= sizeof(uint64_t))
		memcpy(&attr->data, data, len);
	else
		attr->data = ioctl_ptr_to_u64(data);
	return attr;
}

#define fill_attr_in_ptr(cmd, attr_id, ptr)                                    \
	fill_attr_in(cmd, attr_id, ptr, sizeof(*(ptr)))

static inline struct ib_uverbs_attr *
fill_attr_in_uint64(struct ibv_command_buffer *cmd, uint16_t attr_id,
		    uint64_t data)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);

	attr->len = sizeof(data);
	attr->data = data;
	return attr;
}

/* A constant input (the kernel accepts any width up to 64 bits). */
#define fill_attr_const_in(cmd, attr_id, _data)                                \
	fill_attr_in_uint64(cmd, attr_id, _data)

static inline struct ib_uverbs_attr *
fill_attr_in_uint32(struct ibv_command_buffer *cmd, uint16_t attr_id,
		    uint32_t data)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);

	attr->len = sizeof(data);
	memcpy(&attr->data, &data, sizeof(data));
	return attr;
}

/* A file descriptor given to the kernel; fd -1 adds nothing (NULL). */
static inline struct ib_uverbs_attr *
fill_attr_in_fd(struct ibv_command_buffer *cmd, uint16_t attr_id, int fd)
{
	struct ib_uverbs_attr *attr;

	if (fd == -1)
		return NULL;
	attr = _ioctl_next_attr(cmd, attr_id);
	attr->data = (uint64_t)fd;
	return attr;
}

/* A file descriptor the kernel creates; read it with read_attr_fd(). */
static inline struct ib_uverbs_attr *
fill_attr_out_fd(struct ibv_command_buffer *cmd, uint16_t attr_id, int fd)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);

	attr->data = (uint64_t)fd;
	return attr;
}

static inline int read_attr_fd(uint16_t attr_id, struct ib_uverbs_attr *attr)
{
	assert(attr->attr_id == attr_id);
	(void)attr_id;
	return (int)attr->data;
}

/* Output buffer the kernel writes (len bytes at data). */
static inline struct ib_uverbs_attr *
fill_attr_out(struct ibv_command_buffer *cmd, uint16_t attr_id, void *data,
	      size_t len)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);

	if (len > UINT16_MAX)
		cmd->buffer_error = 1;
	attr->len = (uint16_t)len;
	attr->data = ioctl_ptr_to_u64(data);
	return attr;
}

#define fill_attr_out_ptr(cmd, attr_id, ptr)                                   \
	fill_attr_out(cmd, attr_id, ptr, sizeof(*(ptr)))

/* size * nelems, or SIZE_MAX when the product overflows. */
static inline size_t _array_len(size_t size, size_t nelems)
{
	if (size && nelems > SIZE_MAX / size)
		return SIZE_MAX;
	return size * nelems;
}

#define fill_attr_out_ptr_array(cmd, attr_id, ptr, nelems)                     \
	fill_attr_out(cmd, attr_id, ptr, _array_len(sizeof(*(ptr)), nelems))

#define fill_attr_in_ptr_array(cmd, attr_id, ptr, nelems)                      \
	fill_attr_in(cmd, attr_id, ptr, _array_len(sizeof(*(ptr)), nelems))

static inline size_t __check_divide(size_t val, unsigned int div)
{
	assert(val % div == 0);
	return val / div;
}

/* An input whose meaning is chosen by elem_id (UVERBS_ATTR_ENUM_IN). */
static inline struct ib_uverbs_attr *
fill_attr_in_enum(struct ibv_command_buffer *cmd, uint16_t attr_id,
		  uint8_t elem_id, const void *data, size_t len)
{
	struct ib_uverbs_attr *attr = fill_attr_in(cmd, attr_id, data, len);

	attr->attr_data.enum_data.elem_id = elem_id;
	return attr;
}

/* An array of object handles. */
static inline struct ib_uverbs_attr *
fill_attr_in_objs_arr(struct ibv_command_buffer *cmd, uint16_t attr_id,
		      const uint32_t *idrs_arr, size_t nelems)
{
	struct ib_uverbs_attr *attr = _ioctl_next_attr(cmd, attr_id);
	size_t len = _array_len(sizeof(*idrs_arr), nelems);

	if (len > UINT16_MAX)
		cmd->buffer_error = 1;
	attr->len = (uint16_t)len;
	attr->data = ioctl_ptr_to_u64(idrs_arr);
	return attr;
}

#ifdef __cplusplus
}
#endif

#endif /* INFINIBAND_CMD_IOCTL_H */
