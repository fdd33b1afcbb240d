/* Chat templates: the compiler and the renderer on each construct (the
 * expected texts are what @huggingface/jinja renders for the same template
 * and conversation), taint, the bounds, compile-time refusals, and hostile
 * programs refused by nib_chat_check. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt/chat/chat.h"
#include "rt/chat/chat_prog.h"
#include "tests/common/test_util.h"
#include "tools/compiler/chat_compile.h"

#define CAP (1u << 16)

static const struct nib_chat_message conv[] = {
    {(const uint8_t *)"system", (const uint8_t *)" Be brief. ", 6, 11},
    {(const uint8_t *)"user", (const uint8_t *)"Hi <b>", 4, 6},
    {(const uint8_t *)"assistant", (const uint8_t *)"Yo", 9, 2},
};

struct out {
    int rc;
    size_t len;
    uint8_t text[CAP + 1], taint[CAP];
    char err[256];
};

static uint8_t *compile_ok(const char *t, size_t *len)
{
    uint8_t *prog;
    char err[256];
    int rc = nib_chat_compile(t, strlen(t), &prog, len, err, sizeof err);
    ck_assert_msg(rc == 0, "compile %s: %s", t, err);
    return prog;
}

/* Render prog with the conversation above (or a given one). */
static void run_prog(const uint8_t *prog, size_t len, const struct nib_chat_message *m, uint32_t n,
                     size_t cap, size_t scratch_size, struct out *o)
{
    struct nib_chat_args a = {m, n, 1,         (const uint8_t *)"<s>", (const uint8_t *)"</s>",
                              3, 4, 1764460800};
    if (!scratch_size)
        scratch_size = nib_chat_scratch_footprint(64, cap);
    void *scratch = malloc(scratch_size);
    ck_assert_ptr_nonnull(scratch);
    o->rc = nib_chat_render(prog, len, &a, scratch, scratch_size, o->text, o->taint, cap, &o->len,
                            o->err, sizeof o->err);
    o->text[o->rc == 0 ? o->len : 0] = 0;
    free(scratch);
}

static struct out *render(const char *t)
{
    static struct out o;
    size_t len;
    uint8_t *prog = compile_ok(t, &len);
    run_prog(prog, len, conv, 3, CAP, 0, &o);
    free(prog);
    return &o;
}

static const struct {
    const char *tmpl, *want;
} cases[] = {
    /* Unicode case mapping as JavaScript's: full mappings, Final_Sigma */
    {"{{ 'Straße ÉTÉ ΣΑΣ ǅ ﬁ'|upper }}|{{ 'ÉTÉ ΟΔΟΣ ΣΑΣ. Σ ΑΣ\\u0301 x'|lower }}|{{ "
     "'élan'|capitalize }}|"
     "{{ 'İ'|lower|length }}|{{ 'ÉTÉ' is upper }}{{ 'été' is lower }}|{{ ['b', 'É', 'a']|sort }}",
     "STRASSE ÉTÉ ΣΑΣ Ǆ FI|été οδος σας. σ ας́ x|Élan|2|truetrue|[\"a\", \"b\", \"É\"]"},
    {"a  {{- ' b ' -}}  c", "a b c"},
    {"x\n  {% if true %}\n  y\n  {% endif %}\nz", "x\n  y\nz"},
    {"{# note #}a{#- x -#}  b", "ab"},
    {"a\n", "a"},
    {"{{ 1 }}|{{ 1.0 }}|{{ 2.5 }}|{{ -3 }}|{{ 10 // 3 }}", "1|1.0|2.5|-3|3"},
    {"{{ true }} {{ none }}|{{ undefined_name }}|{{ [1, 'a', none] }}|{{ {'k': [true]} }}",
     "true ||[1, \"a\", null]|{\"k\": [true]}"},
    {"{{ 'a\\tb\\n' ~ \"q\\\"\" }}", "a\tb\nq\""},
    {"{{ 'a' 'b' }}", "ab"},
    {"{{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }}",
     "3.5 3 1 -1 1024 0.30000000000000004"},
    {"{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 3 > 2 and 2 > 3 }} {{ not 0 }}", "3 9 false true"},
    {"{{ 'a' + 1 }} {{ 1 ~ 2 }} {{ 2.0 ~ '' }} {{ [1] + [2] }}", "a1 12 2 [1, 2]"},
    {"{{ 1 == 1.0 }} {{ '1' == 1 }} {{ none == undef }} {{ [] == [] }}", "true true true false"},
    {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 1 not in [] }} {{ 'x' in undef "
     "}}",
     "true true true true false"},
    {"{{ x is defined }} {{ messages is iterable }} {{ 'a' is string }} {{ 3 is odd }} {{ 4 is "
     "even }} {{ none is none }} {{ {} is mapping }} {{ 1.5 is number }} {{ 1 is integer }} {{ "
     "true is boolean }} {{ 'ab' is lower }} {{ x is not undefined }}",
     "false true true true true true true true true true true false"},
    {"{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages|length }} {{ messages[5] is "
     "undefined }}",
     "system Yo 3 true"},
    {"{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4][::2] }} {{ [1,2,3][-2:] }} {{ "
     "'hé😀x'[1:3] }}",
     "el olleh [1, 3] [2, 3] é😀"},
    {"{{ 'abc'[0] }}{{ 'abc'[-1] }} {{ 'abc'.length }}", "ac 3"},
    {"{{ ' x '|trim }}|{{ 'Ab'|upper }}|{{ 'Ab'|lower }}|{{ 'hello world'|title }}|{{ "
     "'abc'|capitalize }}",
     "x|AB|ab|Hello World|Abc"},
    {"{{ [3,1,2]|sort }} {{ [1,2]|reverse }} {{ [1,2]|first }} {{ [1,2]|last }} {{ "
     "['a','b']|join(', ') }} {{ [1,1,2]|unique }}",
     "[1, 2, 3] [2, 1] 1 2 a, b [1, 2]"},
    {"{{ x|default('d') }} {{ ''|default('e', true) }} {{ '42'|int + 1 }} {{ '2.5'|float }} {{ "
     "-3|abs }} {{ 3|string ~ 'x' }}",
     "d e 43 2.5 3 3x"},
    {"{{ {'a': 1, 'b': [2]}|tojson }} {{ 'é\"'|tojson }} {{ [1, {'x': none}]|tojson(indent=2) }}",
     "{\"a\": 1, \"b\": [2]} \"é\\\"\" [\n  1,\n  {\n    \"x\": null\n  }\n]"},
    {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join }}|{{ "
     "messages|rejectattr('role', 'equalto', 'user')|length }}",
     "Hi <b>|2"},
    {"{{ {'b': 1, 'a': 2}|items }} {{ {'b': 1}|length }} {{ 'a\\nb'|indent(2, true) }}",
     "[[\"b\", 1], [\"a\", 2]] 1   a\n  b"},
    {"{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'.replace('a', 'b', 2) }}", "a+b+c bba"},
    {"{{ ' x '.strip() }}|{{ 'xa'.lstrip('x') }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') "
     "}}|{{ 'a,b,c'.split(',', 1) }}",
     "x|xa|[\"a\", \"b\", \"c\"]|[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b,c\"]"},
    {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'Hi'.upper() }}{{ "
     "'Hi'.lower() }}",
     "true true HIhi"},
    {"{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 2) }} {{ {'a': 1}.get('b') }} {{ {'a': 1, 'b': "
     "2}.keys() }} {{ {'a': 1}.values() }}",
     "1 2  [\"a\", \"b\"] [1]"},
    {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ "
     "loop.length }}{{ loop.revindex }};{% endfor %}",
     "10truefalse33;21falsefalse32;32falsetrue31;"},
    {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}", "a=1 b=2 "},
    {"{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{% else %}none{% endfor %}|{% for x in [] "
     "%}{{ x }}{% else %}empty{% endfor %}",
     "24|empty"},
    {"{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}|{% for x in "
     "[1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
     "1|13"},
    {"{% set x = 1 %}{% set a, b = [2, 3] %}{{ x }}{{ a }}{{ b }}{% set ns = namespace(n=0) %}{% "
     "for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
     "1233"},
    {"{% set t %}[{{ 1 + 1 }}]{% endset %}{{ t ~ t }}", "[2][2]"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ "
     "greet('B', punct='?') }}",
     "Hi A! Hi B?"},
    {"{% if false %}a{% elif 1 > 2 %}b{% elif true %}c{% else %}d{% endif %}", "c"},
    {"{{ 'y' if messages else 'n' }} {{ 'z' if false }}.", "y ."},
    {"{% filter upper %}ab{{ 'c' }}{% endfilter %}", "ABC"},
    {"{{ range(3) }} {{ range(1, 7, 2) }} {{ range(3, 0, -1)|list }}",
     "[0, 1, 2] [1, 3, 5] [3, 2, 1]"},
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1"},
    {"{% if true %}{% set y = 5 %}{% endif %}{{ y }}", "5"},
    {"{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}", "<s></s>true"},
    {"{{ (messages|first).content|trim }}|{{ messages[0]['content'].strip() }}",
     "Be brief.|Be brief."},
};

START_TEST(each_construct)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct out *o = render(cases[i].tmpl);
        ck_assert_msg(o->rc == 0, "%s: %s", cases[i].tmpl, o->err);
        ck_assert_msg(o->len == strlen(cases[i].want) && !memcmp(o->text, cases[i].want, o->len),
                      "%s\n got: %s\nwant: %s", cases[i].tmpl, o->text, cases[i].want);
    }
}
END_TEST

START_TEST(raise_exception_message)
{
    struct out *o = render("{% if messages[1].role == 'user' %}{{ raise_exception('no ' + "
                           "messages[1].role + 's here') }}{% endif %}ok");
    ck_assert_int_eq(o->rc, -1);
    ck_assert_str_eq(o->err, "no users here");
}
END_TEST

START_TEST(engine_errors)
{
    static const char *const bad[] = {
        "{{ 1 + none }}",
        "{{ messages.x.y + 1 }}",
        "{{ 'a' < 'b' }}",
        "{{ [] | first }}",
        "{{ 'a' | nosuchfilter }}",
        "{{ 1 is nosuchtest }}",
        "{% for c in 'abc' %}{% endfor %}",
        "{{ x() }}",
        "{{ range(0, 10, 0) }}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct out *o = render(bad[i]);
        ck_assert_msg(o->rc == -1 && o->err[0], "%s rendered", bad[i]);
    }
}
END_TEST

START_TEST(taint_follows_message_bytes)
{
    struct out *o = render("[{{ messages[1].content | upper }}]{{ bos_token }}"
                           "{{ messages[0].content | trim ~ '!' }}{{ messages[1].role[1:] }}"
                           "{{ messages[1].content | tojson }}");
    ck_assert_int_eq(o->rc, 0);
    ck_assert_str_eq((char *)o->text, "[HI <B>]<s>Be brief.!ser\"Hi <b>\"");
    /* [ HI <B> ] <s> Be brief. ! ser " Hi <b> " */
    const char *map = "0111111000011111111101110111111"
                      "0";
    ck_assert_uint_eq(o->len, strlen(map));
    for (size_t i = 0; i < o->len; i++)
        ck_assert_msg((o->taint[i] != 0) == (map[i] == '1'), "byte %zu ('%c') taint %d", i,
                      o->text[i], o->taint[i]);
}
END_TEST

START_TEST(strftime_pinned)
{
    struct out *o = render("{{ strftime_now('%d %b %Y|%B %m %H:%M %%|%-d %A') }}");
    ck_assert_int_eq(o->rc, 0);
    /* 1764460800 = 2025-11-30 00:00 UTC; unknown codes stay as written */
    ck_assert_str_eq((char *)o->text, "30 Nov 2025|November 11 00:00 %|%-d %A");
}
END_TEST

START_TEST(bounds)
{
    size_t len;
    struct out *o = malloc(sizeof *o);
    /* output cap */
    uint8_t *prog = compile_ok("{% for i in range(1000) %}0123456789{% endfor %}", &len);
    run_prog(prog, len, conv, 3, 100, 0, o);
    ck_assert_int_eq(o->rc, -1);
    ck_assert_ptr_nonnull(strstr(o->err, "exceeds 100 bytes"));
    free(prog);
    /* recursion: a macro calling itself */
    prog = compile_ok("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &len);
    run_prog(prog, len, conv, 3, CAP, 0, o);
    ck_assert_int_eq(o->rc, -1);
    ck_assert_ptr_nonnull(strstr(o->err, "nests deeper"));
    free(prog);
    /* work: nested loops over a long range */
    prog = compile_ok("{% set r = range(3000) %}{% for i in r %}{% for j in r %}{% endfor %}"
                      "{% endfor %}",
                      &len);
    run_prog(prog, len, conv, 3, CAP, 0, o);
    ck_assert_int_eq(o->rc, -1);
    ck_assert_ptr_nonnull(strstr(o->err, "work bound"));
    free(prog);
    /* scratch */
    prog = compile_ok("{% set ns = namespace(s='') %}{% for i in range(300) %}"
                      "{% set ns.s = ns.s ~ 'abcdefgh' %}{% endfor %}{{ ns.s|length }}",
                      &len);
    run_prog(prog, len, conv, 3, CAP, 1 << 16, o);
    ck_assert_int_eq(o->rc, -1);
    ck_assert_ptr_nonnull(strstr(o->err, "scratch"));
    run_prog(prog, len, conv, 3, CAP, 256u << 20, o);
    ck_assert_msg(o->rc == 0, "%s", o->err);
    ck_assert_str_eq((char *)o->text, "2400");
    free(prog);
    free(o);
}
END_TEST

START_TEST(compile_refusals)
{
    static const char *const bad[] = {
        "{% call foo() %}x{% endcall %}",
        "{% break %}",
        "{% if x %}unterminated",
        "{{ 'unterminated }}",
        "{{ x ! y }}",
        "{% macro m() %}{{ varargs }}{% endmacro %}",
        "{{ f(*args) }}",
        "{% raw %}{% endraw %}",
        "{{ '\\q' }}",
        "{{ '\\ud800' }}",
        "{% set 1 = 2 %}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *prog = NULL;
        size_t len;
        char err[256];
        int rc = nib_chat_compile(bad[i], strlen(bad[i]), &prog, &len, err, sizeof err);
        ck_assert_msg(rc == -1 && prog == NULL, "%s compiled", bad[i]);
        ck_assert_msg(strstr(err, "chat template line 1:") == err, "%s: %s", bad[i], err);
    }
    char deep[4096] = "{{ ";
    for (int i = 0; i < 300; i++)
        strcat(deep, "(");
    strcat(deep, "1");
    for (int i = 0; i < 300; i++)
        strcat(deep, ")");
    strcat(deep, " }}");
    uint8_t *prog;
    size_t len;
    char err[256];
    ck_assert_int_eq(nib_chat_compile(deep, strlen(deep), &prog, &len, err, sizeof err), -1);
}
END_TEST

START_TEST(builtin_families)
{
    for (const char *const *f = nib_chat_families; *f; f++) {
        const char *t = nib_chat_builtin(*f);
        ck_assert_ptr_nonnull(t);
        struct out *o = render(t);
        ck_assert_msg(o->rc == 0, "%s: %s", *f, o->err);
        ck_assert_ptr_nonnull(strstr((char *)o->text, "Hi <b>"));
    }
    ck_assert_ptr_null(nib_chat_builtin("nosuch"));
}
END_TEST

/* Every single-byte change and every truncation of a valid program is
 * either refused by the check or renders without crashing. */
START_TEST(hostile_programs)
{
    size_t len;
    uint8_t *prog = compile_ok("{% for m in messages %}{% if m.role == 'user' %}[{{ m.content | "
                               "trim }}]{% else %}{{ m['content'][1:] ~ loop.index }}{% endif %}"
                               "{% endfor %}{{ 'x' if add_generation_prompt }}",
                               &len);
    char err[256];
    ck_assert_int_eq(nib_chat_check(prog, len, err, sizeof err), 0);
    struct out *o = malloc(sizeof *o);
    uint8_t *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, prog, len);
            copy[i] ^= (uint8_t)(1u << bit);
            if (nib_chat_check(copy, len, err, sizeof err) == 0)
                run_prog(copy, len, conv, 3, 4096, 0, o);
            else
                ck_assert(err[0] != 0);
        }
    }
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(nib_chat_check(prog, n, err, sizeof err), -1);
    /* a kid index pointing back (a cycle) */
    memcpy(copy, prog, len);
    nib_chat_wr32(copy + NIB_CHAT_HEADER + 4, 0);
    ck_assert_int_eq(nib_chat_check(copy, len, err, sizeof err), -1);
    ck_assert_int_eq(
        nib_chat_render(copy, len, &(struct nib_chat_args){conv, 3, 1, NULL, NULL, 0, 0, 0},
                        o->taint, sizeof o->taint, o->text, NULL, CAP, &o->len, err, sizeof err),
        -1);
    free(copy);
    free(o);
    free(prog);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("chat");
    TU_CASE(s, "render", NULL, NULL, 120, each_construct, raise_exception_message, engine_errors,
            taint_follows_message_bytes, strftime_pinned, builtin_families);
    TU_CASE(s, "bounds", NULL, NULL, 300, bounds, compile_refusals, hostile_programs);
    return s;
}
