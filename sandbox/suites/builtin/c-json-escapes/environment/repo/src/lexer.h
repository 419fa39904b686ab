#ifndef MINIJSON_LEXER_H
#define MINIJSON_LEXER_H

#include <stddef.h>

#include "jbuf.h"

typedef enum {
    TOK_EOF = 0,
    TOK_LBRACE,
    TOK_RBRACE,
    TOK_LBRACKET,
    TOK_RBRACKET,
    TOK_COLON,
    TOK_COMMA,
    TOK_STRING,
    TOK_NUMBER,
    TOK_TRUE,
    TOK_FALSE,
    TOK_NULL,
    TOK_ERROR
} json_tok_type;

typedef enum {
    JSON_OK = 0,
    JSON_ERR_UNEXPECTED_CHAR,
    JSON_ERR_UNTERMINATED,
    JSON_ERR_ESCAPE,
    JSON_ERR_CONTROL_CHAR,
    JSON_ERR_NUMBER,
    JSON_ERR_UTF8,
    JSON_ERR_NOMEM
} json_err;

typedef struct {
    json_tok_type type;
    size_t offset;   /* byte offset of the token in the input */
    size_t length;   /* length of the raw token text */
    size_t line;     /* 1-based line of the token start */
    size_t col;      /* 1-based column (in bytes) of the token start */
    jbuf str;        /* TOK_STRING: decoded UTF-8 value (may contain NUL bytes) */
    double number;   /* TOK_NUMBER: numeric value */
} json_token;

typedef struct {
    const char *src;
    size_t len;
    size_t pos;
    size_t line;
    size_t line_start;
    json_err err;
    size_t err_offset;
} json_lexer;

void json_lexer_init(json_lexer *lx, const char *src, size_t len);

void json_token_init(json_token *tok);
void json_token_free(json_token *tok);

/* Scans the next token into tok (which must have been initialised with
 * json_token_init; it can be reused across calls). Returns tok->type.
 * On TOK_ERROR, lx->err and lx->err_offset describe the problem and the
 * lexer stays at the error. */
json_tok_type json_lexer_next(json_lexer *lx, json_token *tok);

/* Decodes a complete JSON string literal (including the surrounding quotes)
 * into out. Returns JSON_OK or the error that stopped decoding. */
json_err json_decode_string(const char *lit, size_t len, jbuf *out);

const char *json_strerror(json_err err);
const char *json_tok_name(json_tok_type type);

#endif
