/* Subcommands of the `nib` tool. Each takes argv with argv[0] = its name and
 * returns the process exit status (0 ok, 1 failure, 2 usage error). */
#ifndef NIB_CLI_H
#define NIB_CLI_H

#include <stddef.h>
#include <stdint.h>

int nib_synth_main(int argc, char **argv);
int nib_compile_main(int argc, char **argv);
int nib_inspect_main(int argc, char **argv);
int nib_eval_main(int argc, char **argv);
int nib_ask_main(int argc, char **argv);
int nib_stop_main(int argc, char **argv);
int nib_stats_main(int argc, char **argv);
int nib_topo_main(int argc, char **argv);
int nib_bench_main(int argc, char **argv);
int nib_bench_latency_main(int argc, char **argv); /* nib bench --latency */

/* Map a whole file read-only. 0, or -1 with a message. */
int nib_map_file(const char *path, const uint8_t **data, size_t *size, char *err, size_t errlen);
void nib_unmap_file(const uint8_t *data, size_t size);

/* Strict number parsing for options: 0 ok, -1 on junk or out of range. */
int nib_parse_u32(const char *s, uint32_t max, uint32_t *out);
int nib_parse_u64(const char *s, uint64_t *out);
int nib_parse_f32(const char *s, float *out);

#endif
