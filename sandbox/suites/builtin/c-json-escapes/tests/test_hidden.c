/* Hidden tests for minijson string escape decoding. Each test's outcome goes, by name, to the fd grade.py gives
 * in $LEAFCOST_RESULTS_FD ("passed NAME" / "failed NAME", then "done"): what the program prints or its exit status
 * decide nothing. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minijson.h"

static int failures;
static int current_failed;
static int results_fd = -1;

#define EXPECT(cond) do { \
    if (!(cond)) { \
        printf("    line %d: expected %s\n", __LINE__, #cond); \
        current_failed = 1; \
    } \
} while (0)

#define RUN(test) do { \
    current_failed = 0; \
    test(); \
    printf("%s %s\n", current_failed ? "FAIL" : "PASS", #test); \
    dprintf(results_fd, "%s %s\n", current_failed ? "failed" : "passed", #test); \
    if (current_failed) failures++; \
} while (0)

/* Decodes lit and compares with want (want_len bytes). */
static void expect_decoded(int line, const char *lit, const char *want, size_t want_len)
{
    jbuf out;
    json_err err;

    jbuf_init(&out);
    err = json_decode_string(lit, strlen(lit), &out);
    if (err != JSON_OK) {
        printf("    line %d: decoding %s failed: %s\n", line, lit, json_strerror(err));
        current_failed = 1;
    } else if (out.len != want_len || memcmp(out.data, want, want_len) != 0) {
        size_t i;

        printf("    line %d: decoding %s gave %lu bytes:", line, lit, (unsigned long)out.len);
        for (i = 0; i < out.len; i++)
            printf(" %02X", (unsigned char)out.data[i]);
        printf("\n");
        current_failed = 1;
    }
    jbuf_free(&out);
}

static void expect_error(int line, const char *lit, json_err want)
{
    jbuf out;
    json_err err;

    jbuf_init(&out);
    err = json_decode_string(lit, strlen(lit), &out);
    if (err != want) {
        printf("    line %d: decoding %s returned \"%s\", expected \"%s\"\n",
               line, lit, json_strerror(err), json_strerror(want));
        current_failed = 1;
    }
    jbuf_free(&out);
}

#define DECODES(lit, want) expect_decoded(__LINE__, lit, want, sizeof(want) - 1)
#define REJECTS(lit, err) expect_error(__LINE__, lit, err)

/* ---------------- FAIL-TO-PASS ---------------- */

/* F2P */
static void test_f2p_surrogate_pair_emoji(void)
{
    DECODES("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80");
    DECODES("\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80");
}

/* F2P */
static void test_f2p_surrogate_pair_inside_text(void)
{
    DECODES("\"clef: \\uD834\\uDD1E!\"", "clef: \xf0\x9d\x84\x9e!");
    DECODES("\"\\ud83d\\udc4d\\ud83c\\udffd\"", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd");
    DECODES("\"\\u00e9\\ud83d\\ude00\\n\"", "\xc3\xa9\xf0\x9f\x98\x80\n");
}

/* F2P */
static void test_f2p_surrogate_pair_range_limits(void)
{
    DECODES("\"\\ud800\\udc00\"", "\xf0\x90\x80\x80");   /* U+10000 */
    DECODES("\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf");   /* U+10FFFF */
}

/* F2P */
static void test_f2p_lone_high_surrogate_rejected(void)
{
    REJECTS("\"\\ud83d\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\ud83dabc\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\ud83d\\u0041\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\ud83d\\ud83d\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\ud83d\\n\"", JSON_ERR_ESCAPE);
}

/* F2P */
static void test_f2p_lone_low_surrogate_rejected(void)
{
    REJECTS("\"\\ude00\"", JSON_ERR_ESCAPE);
    REJECTS("\"x\\udfff\\ud83d\"", JSON_ERR_ESCAPE);
}

/* F2P */
static void test_f2p_lexer_token_roundtrip(void)
{
    const char *emoji = "smile \xf0\x9f\x98\x80 / \xf0\x9d\x84\x9e";
    jbuf doc, back;
    json_lexer lx;
    json_token tok;

    jbuf_init(&doc);
    jbuf_init(&back);
    jbuf_puts(&doc, "{\"k\": ");
    EXPECT(json_quote(&doc, emoji, strlen(emoji), JSON_ESCAPE_ASCII) == JSON_OK);
    jbuf_puts(&doc, "}");
    EXPECT(strstr(doc.data, "\\ud83d\\ude00") != NULL);

    json_lexer_init(&lx, doc.data, doc.len);
    json_token_init(&tok);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_LBRACE);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_STRING);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_COLON);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_STRING);
    EXPECT(tok.str.len == strlen(emoji) && memcmp(tok.str.data, emoji, tok.str.len) == 0);
    EXPECT(utf8_valid(tok.str.data, tok.str.len));
    EXPECT(json_escape(&back, tok.str.data, tok.str.len, 0) == JSON_OK);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_RBRACE);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_EOF);
    json_token_free(&tok);
    jbuf_free(&doc);
    jbuf_free(&back);
}

/* F2P */
static void test_f2p_lexer_reports_unpaired_surrogate(void)
{
    const char *src = "[\"ok\", \"\\udc00\"]";
    json_lexer lx;
    json_token tok;

    json_lexer_init(&lx, src, strlen(src));
    json_token_init(&tok);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_LBRACKET);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_STRING);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_COMMA);
    EXPECT(json_lexer_next(&lx, &tok) == TOK_ERROR);
    EXPECT(lx.err == JSON_ERR_ESCAPE);
    json_token_free(&tok);
}

/* ---------------- PASS-TO-PASS ---------------- */

/* P2P */
static void test_p2p_simple_escapes(void)
{
    DECODES("\"a\\\"b\\\\c\\/d\"", "a\"b\\c/d");
    DECODES("\"\\b\\f\\n\\r\\t\"", "\b\f\n\r\t");
    DECODES("\"\"", "");
    DECODES("\"end\\\\\"", "end\\");
}

/* P2P */
static void test_p2p_bmp_unicode_escapes(void)
{
    DECODES("\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac");
    DECODES("\"\\ud7ff\"", "\xed\x9f\xbf");
    DECODES("\"\\ue000\\uFFFF\"", "\xee\x80\x80\xef\xbf\xbf");
    DECODES("\"a\\u0000b\"", "a\0b");
}

/* P2P */
static void test_p2p_raw_utf8_passthrough(void)
{
    DECODES("\"\xf0\x9f\x98\x80 caf\xc3\xa9\"", "\xf0\x9f\x98\x80 caf\xc3\xa9");
    REJECTS("\"\xed\xa0\xbd\xed\xb8\x80\"", JSON_ERR_UTF8);
}

/* P2P */
static void test_p2p_malformed_escapes(void)
{
    REJECTS("\"\\x41\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\u12\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\uZZZZ\"", JSON_ERR_ESCAPE);
    REJECTS("\"\\ud83d\\ude0\"", JSON_ERR_ESCAPE);
    REJECTS("\"abc", JSON_ERR_UNTERMINATED);
    REJECTS("\"abc\\", JSON_ERR_UNTERMINATED);
    REJECTS("\"tab\there\"", JSON_ERR_CONTROL_CHAR);
}

/* P2P */
static void test_p2p_tokens(void)
{
    const char *src = "{\"n\": [-1.5e2, 0, true, null], \"s\": \"\\u00e9\"}";
    static const json_tok_type want[] = {
        TOK_LBRACE, TOK_STRING, TOK_COLON, TOK_LBRACKET, TOK_NUMBER, TOK_COMMA,
        TOK_NUMBER, TOK_COMMA, TOK_TRUE, TOK_COMMA, TOK_NULL, TOK_RBRACKET,
        TOK_COMMA, TOK_STRING, TOK_COLON, TOK_STRING, TOK_RBRACE, TOK_EOF
    };
    json_lexer lx;
    json_token tok;
    size_t i;

    json_lexer_init(&lx, src, strlen(src));
    json_token_init(&tok);
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        json_tok_type t = json_lexer_next(&lx, &tok);

        EXPECT(t == want[i]);
        if (i == 4)
            EXPECT(tok.number == -150.0);
        if (i == 15)
            EXPECT(tok.str.len == 2 && memcmp(tok.str.data, "\xc3\xa9", 2) == 0);
    }
    json_token_free(&tok);
}

/* P2P */
static void test_p2p_escape_output(void)
{
    jbuf out;

    jbuf_init(&out);
    EXPECT(json_quote(&out, "\xf0\x9f\x98\x80", 4, JSON_ESCAPE_ASCII) == JSON_OK);
    EXPECT(strcmp(out.data, "\"\\ud83d\\ude00\"") == 0);
    jbuf_clear(&out);
    EXPECT(json_quote(&out, "a/b\t\"", 5, JSON_ESCAPE_SLASH) == JSON_OK);
    EXPECT(strcmp(out.data, "\"a\\/b\\t\\\"\"") == 0);
    jbuf_clear(&out);
    EXPECT(json_escape(&out, "\xed\xa0\xbd", 3, 0) == JSON_ERR_UTF8);
    jbuf_free(&out);
}

int main(void)
{
    const char *fd = getenv("LEAFCOST_RESULTS_FD");

    results_fd = fd ? atoi(fd) : -1;
    RUN(test_f2p_surrogate_pair_emoji);
    RUN(test_f2p_surrogate_pair_inside_text);
    RUN(test_f2p_surrogate_pair_range_limits);
    RUN(test_f2p_lone_high_surrogate_rejected);
    RUN(test_f2p_lone_low_surrogate_rejected);
    RUN(test_f2p_lexer_token_roundtrip);
    RUN(test_f2p_lexer_reports_unpaired_surrogate);
    RUN(test_p2p_simple_escapes);
    RUN(test_p2p_bmp_unicode_escapes);
    RUN(test_p2p_raw_utf8_passthrough);
    RUN(test_p2p_malformed_escapes);
    RUN(test_p2p_tokens);
    RUN(test_p2p_escape_output);
    printf("\n%s: %d failing test(s)\n", failures ? "FAILED" : "PASSED", failures);
    dprintf(results_fd, "done\n");
    return failures ? 1 : 0;
}
