/* Front ends of the `nib` tool that live in tools/cli/. Each takes argv
 * with argv[0] = its name and returns the process exit status (0 ok,
 * 1 failure, 2 usage error). The measurement commands are declared in
 * tools/measure/measure.h, synth in tools/compiler/synth.h. */
#ifndef NIB_CLI_H
#define NIB_CLI_H

int nib_compile_main(int argc, char **argv);
int nib_inspect_main(int argc, char **argv);
/* nib inspect's report on a vision blob (tools/cli/inspect_vision.c). */
struct nib_blob_view;
void nib_inspect_vision(const struct nib_blob_view *v, int show_plan, int json);
int nib_ask_main(int argc, char **argv);
int nib_run_main(int argc, char **argv);
int nib_stop_main(int argc, char **argv);
int nib_stats_main(int argc, char **argv);
int nib_topo_main(int argc, char **argv);
int nib_image_main(int argc, char **argv);
int nib_vm_main(int argc, char **argv);
int nib_tokenize_main(int argc, char **argv);
int nib_chat_render_main(int argc, char **argv);
int nib_onnx_run_main(int argc, char **argv);
/* nib compile MODEL.onnx (compile_onnx.c; nib compile dispatches to it). */
int nib_compile_onnx_main(int argc, char **argv);
/* nib eval MODEL.onnx (eval_onnx.c; nib eval dispatches to it). */
int nib_eval_onnx_main(int argc, char **argv);

#endif
