/* blob_incbin.S: embed the model blob in the appliance.
 *
 * The bytes of the blob produced by `nib compile` land in section .nib_blob,
 * between the symbols nib_blob_start and nib_blob_end, and its size is the
 * 64-bit constant nib_blob_size in .rodata. C code (boot/main.c) uses
 *
 *     extern const unsigned char nib_blob_start[];
 *     extern const uint64_t nib_blob_size;
 *
 * and never nib_blob_end: linker/nib_blob.ld puts the blob last in the
 * image, right after .bss, so its start is close to the code but its end may
 * lie gigabytes further, out of reach of the 32-bit PC-relative references
 * (R_X86_64_PC32, AArch64 ADRP) that the default code model uses. The size
 * is computed by the assembler (both labels are in this section), so it
 * needs no relocation at all. nib_blob_end stays in the symbol table for
 * linker/nib_elf_check.c and debuggers.
 *
 * linker/nib_blob.ld gives .nib_blob its own read-only PT_LOAD segment,
 * aligned to 2 MiB in both virtual address and file offset.
 *
 * The file name is fixed: linker/link-appliance.sh links the blob as
 * "nib.blob" into a folder of its own and assembles this file from there
 * with -Wa,-I<that folder>. So a blob path is never spelled in C
 * preprocessor input, where a path holding quotes, backslashes or a word
 * such as "linux" (a predefined macro under gnu11) would be mangled.
 *
 * The section is aligned to 2 MiB here too (.p2align 21), so even a link
 * without nib_blob.ld keeps the blob's first byte on a huge-page boundary.
 * "%progbits" rather than "@progbits": '@' starts a comment on AArch64.
 */

	.section .nib_blob, "a", %progbits
	.p2align 21

	.globl	nib_blob_start
	.type	nib_blob_start, %object
nib_blob_start:
	.incbin	"nib.blob"
	.globl	nib_blob_end
	.type	nib_blob_end, %object
nib_blob_end:
	.size	nib_blob_start, nib_blob_end - nib_blob_start
	.size	nib_blob_end, 0

	/* The size, as data: an assembly-time constant (no relocation). */
	.section .rodata.nib_blob_size, "a", %progbits
	.p2align 3
	.globl	nib_blob_size
	.type	nib_blob_size, %object
nib_blob_size:
	.8byte	nib_blob_end - nib_blob_start
	.size	nib_blob_size, 8

	/* No executable stack for the appliance. */
	.section .note.GNU-stack, "", %progbits
