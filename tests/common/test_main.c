/* The one main() of every Check suite: each defines nib_test_suite(). */
#include <check.h>

#include "tests/common/test_util.h"

int main(void)
{
    return tu_run_suite(nib_test_suite());
}
