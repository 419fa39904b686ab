#include "lexer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

void json_lexer_init(json_lexer *lx, const char *src, size_t len)
{
    lx->src = src;
    lx->len = len;
    lx->pos = 0;
    lx->line = 1;
    lx->line_start = 0;
    lx->err = JSON_OK;
    lx->err_offset = 0;
}

void json_token_init(json_token *tok)
{
    memset(tok, 0, sizeof(*tok));
    jbuf_init(&tok->str);
}

void json_token_free(json_token *tok)
{
    jbuf_free(&tok->str);
}

static json_tok_type lex_fail(json_lexer *lx, json_token *tok, json_err err, size_t at)
{
    lx->err = err;
    lx->err_offset = at;
    tok->type = TOK_ERROR;
    return TOK_ERROR;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads exactly four hex digits at p. Returns 0 on success. */
static int read_hex4(const char *p, uint32_t *out)
{
    uint32_t v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = (v << 4) | (uint32_t)h;
    }
    *out = v;
    return 0;
}

/* Scans a string literal starting at src[start] == '"'. On success stores the
 * decoded value in out and the index just past the closing quote in *end. */
static json_err scan_string(const char *src, size_t len, size_t start,
                            jbuf *out, size_t *end, size_t *err_at)
{
    size_t i = start + 1;

    jbuf_clear(out);
    for (;;) {
        unsigned char c;

        if (i >= len) {
            *err_at = start;
            return JSON_ERR_UNTERMINATED;
        }
        c = (unsigned char)src[i];
        if (c == '"') {
            *end = i + 1;
            return JSON_OK;
        }
        if (c < 0x20) {
            *err_at = i;
            return JSON_ERR_CONTROL_CHAR;
        }
        if (c == '\\') {
            char decoded;

            if (i + 1 >= len) {
                *err_at = start;
                return JSON_ERR_UNTERMINATED;
            }
            switch (src[i + 1]) {
            case '"':  decoded = '"';  break;
            case '\\': decoded = '\\'; break;
            case '/':  decoded = '/';  break;
            case 'b':  decoded = '\b'; break;
            case 'f':  decoded = '\f'; break;
            case 'n':  decoded = '\n'; break;
            case 'r':  decoded = '\r'; break;
            case 't':  decoded = '\t'; break;
            case 'u': {
                uint32_t cp;
                char enc[4];
                int n;

                if (len - i < 6 || read_hex4(src + i + 2, &cp) != 0) {
                    *err_at = i;
                    return JSON_ERR_ESCAPE;
                }
                n = utf8_encode(cp, enc);
                if (jbuf_append(out, enc, (size_t)n) != 0)
                    return JSON_ERR_NOMEM;
                i += 6;
                continue;
            }
            default:
                *err_at = i;
                return JSON_ERR_ESCAPE;
            }
            if (jbuf_putc(out, decoded) != 0)
                return JSON_ERR_NOMEM;
            i += 2;
            continue;
        }
        if (c < 0x80) {
            if (jbuf_putc(out, (char)c) != 0)
                return JSON_ERR_NOMEM;
            i++;
        } else {
            uint32_t cp;
            size_t k = utf8_decode(src + i, len - i, &cp);

            if (k == 0) {
                *err_at = i;
                return JSON_ERR_UTF8;
            }
            if (jbuf_append(out, src + i, k) != 0)
                return JSON_ERR_NOMEM;
            i += k;
        }
    }
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Validates the JSON number grammar starting at src[start]. Returns the index
 * just past the number, or 0 if the text is not a valid number. */
static size_t scan_number(const char *src, size_t len, size_t start)
{
    size_t i = start;

    if (i < len && src[i] == '-')
        i++;
    if (i >= len)
        return 0;
    if (src[i] == '0') {
        i++;
    } else if (src[i] >= '1' && src[i] <= '9') {
        while (i < len && is_digit(src[i]))
            i++;
    } else {
        return 0;
    }
    if (i < len && src[i] == '.') {
        i++;
        if (i >= len || !is_digit(src[i]))
            return 0;
        while (i < len && is_digit(src[i]))
            i++;
    }
    if (i < len && (src[i] == 'e' || src[i] == 'E')) {
        i++;
        if (i < len && (src[i] == '+' || src[i] == '-'))
            i++;
        if (i >= len || !is_digit(src[i]))
            return 0;
        while (i < len && is_digit(src[i]))
            i++;
    }
    return i;
}

static int match_word(const json_lexer *lx, const char *word)
{
    size_t n = strlen(word);

    return lx->len - lx->pos >= n && memcmp(lx->src + lx->pos, word, n) == 0;
}

static void skip_whitespace(json_lexer *lx)
{
    while (lx->pos < lx->len) {
        char c = lx->src[lx->pos];

        if (c == '\n') {
            lx->line++;
            lx->line_start = lx->pos + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            break;
        }
        lx->pos++;
    }
}

json_tok_type json_lexer_next(json_lexer *lx, json_token *tok)
{
    size_t start;
    char c;

    if (lx->err != JSON_OK) {
        tok->type = TOK_ERROR;
        return TOK_ERROR;
    }
    skip_whitespace(lx);
    start = lx->pos;
    tok->offset = start;
    tok->line = lx->line;
    tok->col = start - lx->line_start + 1;
    tok->length = 0;
    tok->number = 0.0;
    jbuf_clear(&tok->str);

    if (start >= lx->len) {
        tok->type = TOK_EOF;
        return TOK_EOF;
    }

    c = lx->src[start];
    switch (c) {
    case '{': tok->type = TOK_LBRACE;   break;
    case '}': tok->type = TOK_RBRACE;   break;
    case '[': tok->type = TOK_LBRACKET; break;
    case ']': tok->type = TOK_RBRACKET; break;
    case ':': tok->type = TOK_COLON;    break;
    case ',': tok->type = TOK_COMMA;    break;
    case '"': {
        size_t end = 0, err_at = start;
        json_err err = scan_string(lx->src, lx->len, start, &tok->str, &end, &err_at);

        if (err != JSON_OK)
            return lex_fail(lx, tok, err, err_at);
        tok->type = TOK_STRING;
        tok->length = end - start;
        lx->pos = end;
        return TOK_STRING;
    }
    default:
        if (c == '-' || is_digit(c)) {
            size_t end = scan_number(lx->src, lx->len, start);
            char *tmp;

            if (end == 0)
                return lex_fail(lx, tok, JSON_ERR_NUMBER, start);
            tmp = malloc(end - start + 1);
            if (!tmp)
                return lex_fail(lx, tok, JSON_ERR_NOMEM, start);
            memcpy(tmp, lx->src + start, end - start);
            tmp[end - start] = '\0';
            tok->number = strtod(tmp, NULL);
            free(tmp);
            tok->type = TOK_NUMBER;
            tok->length = end - start;
            lx->pos = end;
            return TOK_NUMBER;
        }
        if (match_word(lx, "true")) {
            tok->type = TOK_TRUE;
            tok->length = 4;
        } else if (match_word(lx, "false")) {
            tok->type = TOK_FALSE;
            tok->length = 5;
        } else if (match_word(lx, "null")) {
            tok->type = TOK_NULL;
            tok->length = 4;
        } else {
            return lex_fail(lx, tok, JSON_ERR_UNEXPECTED_CHAR, start);
        }
        lx->pos += tok->length;
        return tok->type;
    }
    tok->length = 1;
    lx->pos++;
    return tok->type;
}

json_err json_decode_string(const char *lit, size_t len, jbuf *out)
{
    size_t end = 0, err_at = 0;
    json_err err;

    if (len == 0 || lit[0] != '"')
        return JSON_ERR_UNEXPECTED_CHAR;
    err = scan_string(lit, len, 0, out, &end, &err_at);
    if (err != JSON_OK)
        return err;
    if (end != len)
        return JSON_ERR_UNEXPECTED_CHAR;
    return JSON_OK;
}

const char *json_strerror(json_err err)
{
    switch (err) {
    case JSON_OK:                  return "no error";
    case JSON_ERR_UNEXPECTED_CHAR: return "unexpected character";
    case JSON_ERR_UNTERMINATED:    return "unterminated string";
    case JSON_ERR_ESCAPE:          return "invalid escape sequence";
    case JSON_ERR_CONTROL_CHAR:    return "unescaped control character in string";
    case JSON_ERR_NUMBER:          return "malformed number";
    case JSON_ERR_UTF8:            return "invalid UTF-8";
    case JSON_ERR_NOMEM:           return "out of memory";
    }
    return "unknown error";
}

const char *json_tok_name(json_tok_type type)
{
    static const char *const names[] = {
        "EOF", "LBRACE", "RBRACE", "LBRACKET", "RBRACKET", "COLON", "COMMA",
        "STRING", "NUMBER", "TRUE", "FALSE", "NULL", "ERROR"
    };

    if ((unsigned)type < sizeof(names) / sizeof(names[0]))
        return names[type];
    return "?";
}
