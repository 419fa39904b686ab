/* jsontok: print the token stream of a JSON document.
 *
 *   jsontok [-a] [FILE]
 *
 * Reads FILE (or stdin) and prints one token per line as
 * "LINE:COL TYPE [VALUE]". String values are re-encoded as JSON; with -a
 * every non-ASCII character is written as a \u escape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minijson.h"

static int read_all(FILE *fp, jbuf *out)
{
    char chunk[4096];
    size_t n;

    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
        if (jbuf_append(out, chunk, n) != 0)
            return -1;
    }
    return ferror(fp) ? -1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: jsontok [-a] [FILE]\n");
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    unsigned flags = 0;
    FILE *fp = stdin;
    jbuf input, line;
    json_lexer lx;
    json_token tok;
    int i, status = 0;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-a") == 0) {
            flags |= JSON_ESCAPE_ASCII;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage();
            return 0;
        } else if (!path) {
            path = argv[i];
        } else {
            usage();
            return 2;
        }
    }
    if (path && strcmp(path, "-") != 0) {
        fp = fopen(path, "rb");
        if (!fp) {
            perror(path);
            return 2;
        }
    }

    jbuf_init(&input);
    if (read_all(fp, &input) != 0) {
        fprintf(stderr, "jsontok: read error\n");
        return 2;
    }
    if (fp != stdin)
        fclose(fp);

    jbuf_init(&line);
    json_token_init(&tok);
    json_lexer_init(&lx, input.data ? input.data : "", input.len);
    for (;;) {
        json_tok_type t = json_lexer_next(&lx, &tok);

        if (t == TOK_EOF)
            break;
        if (t == TOK_ERROR) {
            fprintf(stderr, "jsontok: offset %lu: %s\n",
                    (unsigned long)lx.err_offset, json_strerror(lx.err));
            status = 1;
            break;
        }
        jbuf_clear(&line);
        if (t == TOK_STRING) {
            json_err err = json_quote(&line, tok.str.data, tok.str.len, flags);

            if (err != JSON_OK) {
                fprintf(stderr, "jsontok: %lu:%lu: cannot re-encode string: %s\n",
                        (unsigned long)tok.line, (unsigned long)tok.col,
                        json_strerror(err));
                status = 1;
                break;
            }
        } else if (t == TOK_NUMBER) {
            jbuf_append(&line, input.data + tok.offset, tok.length);
        }
        printf("%lu:%lu %s%s%s\n", (unsigned long)tok.line, (unsigned long)tok.col,
               json_tok_name(t), line.len ? " " : "", line.len ? line.data : "");
    }

    json_token_free(&tok);
    jbuf_free(&line);
    jbuf_free(&input);
    return status;
}
