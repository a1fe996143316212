/*
 * common.c — small things every module of libseqgate uses: error names.
 */
#include "seqgate.h"

const char *sg_err2str(sg_err_t err) {
        switch (err) {
        case SG_OK: return "SG_OK";
        case SG_ERR_INVALID: return "SG_ERR_INVALID";
        case SG_ERR_NOMEM: return "SG_ERR_NOMEM";
        case SG_ERR_STORE: return "SG_ERR_STORE";
        case SG_ERR_MAP_FULL: return "SG_ERR_MAP_FULL";
        case SG_ERR_CONFIG: return "SG_ERR_CONFIG";
        case SG_ERR_KAFKA: return "SG_ERR_KAFKA";
        case SG_ERR_NOT_FOUND: return "SG_ERR_NOT_FOUND";
        case SG_ERR_FOREIGN: return "SG_ERR_FOREIGN";
        case SG_ERR_IO: return "SG_ERR_IO";
        case SG_ERR_FATAL: return "SG_ERR_FATAL";
        }
        return "SG_ERR_UNKNOWN";
}
