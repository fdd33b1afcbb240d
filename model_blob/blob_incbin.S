/* blob_incbin.S: embed the model blob in the appliance.
 *
 * The bytes of the blob produced by `nib compile` land in section .nib_blob,
 * between the symbols
 *
 *     extern const unsigned char nib_blob_start[], nib_blob_end[];
 *
 * linker/nib_blob.ld gives that section its own read-only PT_LOAD segment,
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

	/* No executable stack for the appliance. */
	.section .note.GNU-stack, "", %progbits
