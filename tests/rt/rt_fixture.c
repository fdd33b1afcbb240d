#include "tests/rt/rt_fixture.h"

#include <check.h>
#include <stdlib.h>

#include "rt/team.h"
#include "tests/common/test_util.h"

struct nib_blob_view rtf_view;
static uint8_t *blob;

void rtf_setup(void)
{
    blob = tu_open_test_blob(&rtf_view);
}

void rtf_teardown(void)
{
    free(blob);
}

uint8_t *rtf_arena(void)
{
    return tu_new_arena(&rtf_view);
}

uint32_t rtf_token(uint32_t pos, uint32_t salt)
{
    return (pos * 2654435761u + salt) % rtf_view.h->hp.vocab_size;
}

void rtf_team_start(struct rtf_team *f, struct nib_exec *e, uint32_t n, uint64_t spin_ns,
                    uint64_t barrier_spin_ns)
{
    uint64_t team_size = (nib_team_footprint(n) + 63) & ~63ull;
    f->mem = aligned_alloc(nib_team_align(),
                           (team_size + nib_exec_team_footprint(n, e->v) + 63) & ~63ull);
    ck_assert_ptr_nonnull(f->mem);
    f->t = nib_team_new(f->mem, n, spin_ns, barrier_spin_ns);
    ck_assert_ptr_nonnull(f->t);
    nib_exec_set_team(e, f->t, (uint8_t *)f->mem + team_size);
    ck_assert_int_eq(nib_team_spawn(f->t, NULL, f->tids), 0);
}

void rtf_team_stop(struct rtf_team *f)
{
    nib_team_join(f->t, f->tids);
    free(f->mem);
}
