#include <stdlib.h>

#include "minijson.h"
#include "minitest.h"

static json_err decode(const char *lit, jbuf *out)
{
    jbuf_clear(out);
    return json_decode_string(lit, strlen(lit), out);
}

static void test_punctuation_and_keywords(void)
{
    const char *src = "{ \"a\" : [true, false, null] }";
    static const json_tok_type want[] = {
        TOK_LBRACE, TOK_STRING, TOK_COLON, TOK_LBRACKET, TOK_TRUE, TOK_COMMA,
        TOK_FALSE, TOK_COMMA, TOK_NULL, TOK_RBRACKET, TOK_RBRACE, TOK_EOF
    };
    json_lexer lx;
    json_token tok;
    size_t i;

    json_lexer_init(&lx, src, strlen(src));
    json_token_init(&tok);
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK(json_lexer_next(&lx, &tok) == want[i]);
    json_token_free(&tok);
}

static void test_numbers(void)
{
    const char *src = "[0, -12, 3.25, 1e3, -2.5E-2]";
    static const double want[] = { 0.0, -12.0, 3.25, 1000.0, -0.025 };
    json_lexer lx;
    json_token tok;
    size_t n = 0;

    json_lexer_init(&lx, src, strlen(src));
    json_token_init(&tok);
    while (json_lexer_next(&lx, &tok) != TOK_EOF) {
        CHECK(tok.type != TOK_ERROR);
        if (tok.type == TOK_ERROR)
            break;
        if (tok.type == TOK_NUMBER) {
            CHECK(n < 5 && tok.number == want[n]);
            n++;
        }
    }
    CHECK(n == 5);
    json_token_free(&tok);
}

static void test_bad_numbers(void)
{
    const char *bad[] = { "-", "1.", "2e", ".5", "-x", "1e+" };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_lexer lx;
        json_token tok;

        json_lexer_init(&lx, bad[i], strlen(bad[i]));
        json_token_init(&tok);
        CHECK(json_lexer_next(&lx, &tok) == TOK_ERROR);
        CHECK(lx.err == JSON_ERR_NUMBER || lx.err == JSON_ERR_UNEXPECTED_CHAR);
        json_token_free(&tok);
    }
}

static void test_line_and_column(void)
{
    const char *src = "[\n  1,\n  \"x\"\n]";
    json_lexer lx;
    json_token tok;

    json_lexer_init(&lx, src, strlen(src));
    json_token_init(&tok);
    json_lexer_next(&lx, &tok);
    CHECK(tok.line == 1 && tok.col == 1);
    json_lexer_next(&lx, &tok);
    CHECK(tok.type == TOK_NUMBER && tok.line == 2 && tok.col == 3);
    json_lexer_next(&lx, &tok);
    json_lexer_next(&lx, &tok);
    CHECK(tok.type == TOK_STRING && tok.line == 3 && tok.col == 3);
    json_token_free(&tok);
}

static void test_simple_escapes(void)
{
    jbuf out;

    jbuf_init(&out);
    CHECK(decode("\"a\\\"b\\\\c\\/d\"", &out) == JSON_OK);
    CHECK(strcmp(out.data, "a\"b\\c/d") == 0);
    CHECK(decode("\"\\b\\f\\n\\r\\t\"", &out) == JSON_OK);
    CHECK(strcmp(out.data, "\b\f\n\r\t") == 0);
    jbuf_free(&out);
}

static void test_unicode_escapes_bmp(void)
{
    jbuf out;

    jbuf_init(&out);
    CHECK(decode("\"caf\\u00e9\"", &out) == JSON_OK);
    CHECK(strcmp(out.data, "caf\xc3\xa9") == 0);
    CHECK(decode("\"\\u20AC\"", &out) == JSON_OK);
    CHECK(strcmp(out.data, "\xe2\x82\xac") == 0);
    CHECK(decode("\"\\u0000x\"", &out) == JSON_OK);
    CHECK_MEM(out.data, out.len, "\0x", 2);
    jbuf_free(&out);
}

static void test_string_errors(void)
{
    jbuf out;

    jbuf_init(&out);
    CHECK(decode("\"abc", &out) == JSON_ERR_UNTERMINATED);
    CHECK(decode("\"a\\x\"", &out) == JSON_ERR_ESCAPE);
    CHECK(decode("\"\\u12\"", &out) == JSON_ERR_ESCAPE);
    CHECK(decode("\"\\u12G4\"", &out) == JSON_ERR_ESCAPE);
    CHECK(decode("\"a\nb\"", &out) == JSON_ERR_CONTROL_CHAR);
    CHECK(decode("\"\xc3\"", &out) == JSON_ERR_UTF8);
    jbuf_free(&out);
}

static void test_escape_output(void)
{
    jbuf out;

    jbuf_init(&out);
    CHECK(json_quote(&out, "a\"b\n/", 5, 0) == JSON_OK);
    CHECK(strcmp(out.data, "\"a\\\"b\\n/\"") == 0);
    jbuf_clear(&out);
    CHECK(json_escape(&out, "</x>", 4, JSON_ESCAPE_SLASH) == JSON_OK);
    CHECK(strcmp(out.data, "<\\/x>") == 0);
    jbuf_clear(&out);
    CHECK(json_escape(&out, "\x01", 1, 0) == JSON_OK);
    CHECK(strcmp(out.data, "\\u0001") == 0);
    jbuf_clear(&out);
    CHECK(json_escape(&out, "caf\xc3\xa9", 5, JSON_ESCAPE_ASCII) == JSON_OK);
    CHECK(strcmp(out.data, "caf\\u00e9") == 0);
    jbuf_free(&out);
}

static void test_utf8(void)
{
    char enc[4];
    uint32_t cp = 0;

    CHECK(utf8_encode(0x41, enc) == 1);
    CHECK(utf8_encode(0xE9, enc) == 2);
    CHECK(utf8_encode(0x1F600, enc) == 4);
    CHECK(memcmp(enc, "\xf0\x9f\x98\x80", 4) == 0);
    CHECK(utf8_decode("\xf0\x9f\x98\x80", 4, &cp) == 4 && cp == 0x1F600);
    CHECK(utf8_decode("\xc0\x80", 2, &cp) == 0);
    CHECK(utf8_valid("h\xc3\xa9llo", 6));
    CHECK(!utf8_valid("\xed\xa0\x80", 3));
    CHECK(utf8_length("h\xc3\xa9llo", 6) == 5);
}

int main(void)
{
    RUN(test_punctuation_and_keywords);
    RUN(test_numbers);
    RUN(test_bad_numbers);
    RUN(test_line_and_column);
    RUN(test_simple_escapes);
    RUN(test_unicode_escapes_bmp);
    RUN(test_string_errors);
    RUN(test_escape_output);
    RUN(test_utf8);
    return MT_EXIT();
}
