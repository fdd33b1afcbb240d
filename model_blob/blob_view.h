/* Validated, typed view of a blob held in memory. nib_blob_open checks every
 * field, size, offset and the checksum before handing out pointers; code that
 * holds a nib_blob_view may index the tables it describes without further
 * checks. Shared by the toolchain (nib inspect) and the appliance's boot. */
#ifndef NIB_BLOB_VIEW_H
#define NIB_BLOB_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_format.h"

struct nib_blob_view {
    const uint8_t *base;
    uint64_t size;
    const struct nib_blob_header *h;
    const struct nib_tensor_rec *tensors;
    const struct nib_op *ops;
    const struct nib_tok_header *tok;
    const struct nib_tok_entry *tok_entries;
    const uint32_t *tok_sorted; /* ids sorted by piece bytes */
    const uint8_t *tok_bytes;
    uint64_t tok_bytes_size;
    const uint32_t *tok_byte_ids; /* 256 entries */
    const struct nib_tok_merge *tok_merges;
    uint32_t tok_merge_slots; /* 0 or a power of two */
    const struct nib_tok_trie_node *tok_nodes;
    uint32_t tok_n_nodes;
    const struct nib_tok_trie_edge *tok_edges;
    const struct nib_tok_norm_step *tok_norm;
    uint32_t tok_n_norm;
    const struct nib_tok_pre_step *tok_pre;
    uint32_t tok_n_pre;
    const uint8_t *tok_data; /* its regex programs are run only after nib_tok_check */
    uint32_t tok_data_size;
    const uint8_t *tok_chat; /* NULL: none */
    uint32_t tok_chat_size;
    const struct nib_io_rec *io; /* vision: n_io records, inputs first; NULL for a decoder */
    uint32_t n_io;
    uint32_t n_inputs;
    const uint8_t *weights;
    uint64_t mem_size; /* act_size + kv_size */
};

/* Validate blob (size bytes, 64-byte aligned) and fill v. Returns 0, or -1
 * with a message naming the problem in err. check_crc = 0 skips only the
 * checksum (used by tools that report it separately). */
int nib_blob_open(struct nib_blob_view *v, const void *blob, uint64_t size, int check_crc,
                  char *err, size_t errlen);

/* Validate a tokenizer section on its own (8-byte aligned; nib tokenize on a
 * GGUF or tokenizer.json, tests) and fill v's tokenizer fields; v->h is
 * NULL. 0, or -1 with the problem in err. */
int nib_tok_section_open(struct nib_blob_view *v, const void *sec, uint64_t size, char *err,
                         size_t errlen);

/* Checksum of the blob as stored (bytes NIB_CRC_START..size). */
uint32_t nib_blob_crc(const void *blob, uint64_t size);

/* Bytes a tensor of this dtype and shape must occupy; 0 if unknown. */
uint64_t nib_tensor_bytes(uint32_t dtype, uint32_t rows, uint32_t cols, uint32_t group);

const char *nib_dtype_name(uint32_t dtype);
const char *nib_op_name(uint32_t code);

static inline const float *nib_tensor_f32(const struct nib_blob_view *v, uint32_t t)
{
    return (const float *)(const void *)(v->weights + v->tensors[t].offset);
}

#endif
