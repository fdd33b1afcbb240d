/* The inputs nib eval MODEL.onnx and --auto-precision run a vision blob
 * on: files of a folder (read with nib_tensor_load, in name order), or a
 * built-in synthetic set of image-like tensors (docs/vision.md, "Eval").
 * Each sample is the exact bytes of every input record of the blob. */
#ifndef NIB_VISION_SAMPLES_H
#define NIB_VISION_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"

/* Which synthetic set: eval's and auto-precision's are different images,
 * so that a choice is never scored on the inputs it was made on. */
enum vision_synth_set { VISION_SYNTH_EVAL = 1, VISION_SYNTH_TUNE = 2 };

struct vision_samples {
    uint32_t n;     /* samples */
    uint32_t n_in;  /* input records of each */
    uint8_t **data; /* data[s * n_in + k]: input k of sample s, io[k].bytes */
    int synthetic;  /* 1: the built-in set */
};

/* The names of dir's regular files not starting with '.', in name order
 * (strcmp): *names malloc'd (NULL when none), free with
 * vision_dir_files_free. Calibration and the sets below read folders so.
 * 0, or -1 with a message. */
int vision_dir_files(const char *dir, char ***names, uint32_t *n, char *err, size_t errlen);
void vision_dir_files_free(char **names, uint32_t n);

/* Every regular file of dir not starting with '.', in name order, at most
 * max (0: no limit); the blob must have one input. 0, or -1 with a message
 * naming the file. */
int vision_samples_dir(struct vision_samples *s, const struct nib_blob_view *v, const char *dir,
                       uint32_t max, char *err, size_t errlen);

/* n synthetic samples. An image input ([1,C,H,W]) gets a picture of
 * gradients, boxes, strokes and noise: u8 pixels as they are; f32 as
 * pixel/255 when the blob compiles its own normalisation (normalized),
 * else (pixel/255 - 0.5) / 0.5. Any other input gets smooth values in
 * [-1, 1]. Deterministic. 0, or -1 with a message. */
int vision_samples_synth(struct vision_samples *s, const struct nib_blob_view *v, int normalized,
                         enum vision_synth_set set, uint32_t n, char *err, size_t errlen);

void vision_samples_free(struct vision_samples *s);

#endif
