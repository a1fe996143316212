/*
 * version.c — the version text of both binaries (seqgate.h
 * sg_version_text): seqgate's own version and the libraries it runs on.
 */
#include "seqgate.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <librdkafka/rdkafka.h>
#include <lmdb.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <yajl/yajl_version.h>
#include <yaml.h>

#include <stdio.h>

size_t sg_version_text(char *buf, size_t size) {
        int yv = yajl_version(); /* major * 10000 + minor * 100 + micro */
        int mj, mn, mp;
        mdb_version(&mj, &mn, &mp);
        int n = snprintf(buf, size,
                         "seqgate %s\n"
                         "librdkafka %s\n"
                         "LMDB %d.%d.%d\n"
                         "cJSON %s\n"
                         "yajl %d.%d.%d\n"
                         "libyaml %s\n"
                         "OpenSSL %s\n"
                         "libcurl %s\n"
                         "libmicrohttpd %s\n",
                         SG_VERSION_STR, rd_kafka_version_str(), mj, mn, mp,
                         cJSON_Version(), yv / 10000, yv / 100 % 100, yv % 100,
                         yaml_get_version_string(),
                         OpenSSL_version(OPENSSL_VERSION_STRING),
                         curl_version_info(CURLVERSION_NOW)->version,
                         MHD_get_version());
        return n < 0 ? 0 : (size_t)n;
}
