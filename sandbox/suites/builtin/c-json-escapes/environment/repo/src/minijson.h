#ifndef MINIJSON_H
#define MINIJSON_H

#define MINIJSON_VERSION "0.4.1"

#include "jbuf.h"
#include "utf8.h"
#include "lexer.h"
#include "escape.h"

#endif
