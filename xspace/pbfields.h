/* SPDX-License-Identifier: MIT */
/*
 * pbfields.h - the field numbers of the tensorflow.profiler messages
 * profd encodes (base/pbwire.h) or reads (base/pbread.h, profctl's XSpace
 * reader) by hand instead of through protobuf-c: the XSpace
 * (proto/tensorflow/xplane.proto) and the ProfileResponse framing around
 * it (proto/tensorflow/profiler_service.proto). A number
 * here is a wire contract: it must match the .proto, never be renumbered.
 */
#pragma once

#include <stdint.h>

enum xspace_field { XSPACE_PLANES = 1, XSPACE_ERRORS = 2, XSPACE_WARNINGS = 3, XSPACE_HOSTNAMES = 4 };

enum xplane_field {
	XPLANE_ID = 1,
	XPLANE_NAME = 2,
	XPLANE_LINES = 3,
	XPLANE_EVENT_METADATA = 4, /* map<int64, XEventMetadata> */
	XPLANE_STAT_METADATA = 5,  /* map<int64, XStatMetadata> */
	XPLANE_STATS = 6,
};

enum xline_field {
	XLINE_ID = 1,
	XLINE_NAME = 2,
	XLINE_TIMESTAMP_NS = 3,
	XLINE_EVENTS = 4,
	XLINE_DURATION_PS = 9,
	XLINE_DISPLAY_ID = 10,
	XLINE_DISPLAY_NAME = 11,
};

enum xevent_field {
	XEVENT_METADATA_ID = 1,
	XEVENT_OFFSET_PS = 2,
	XEVENT_DURATION_PS = 3,
	XEVENT_STATS = 4,
	XEVENT_NUM_OCCURRENCES = 5,
};

/* XStat: the metadata id, then one of the values. */
enum xstat_field {
	XSTAT_METADATA_ID = 1,
	XSTAT_DOUBLE_VALUE = 2,
	XSTAT_UINT64_VALUE = 3,
	XSTAT_INT64_VALUE = 4,
	XSTAT_STR_VALUE = 5,
	XSTAT_BYTES_VALUE = 6,
	XSTAT_REF_VALUE = 7,
};

/* XEventMetadata and XStatMetadata agree on id and name (all profd
 * writes); display_name and stats are XEventMetadata's. */
enum xmetadata_field { XMETADATA_ID = 1, XMETADATA_NAME = 2, XMETADATA_DISPLAY_NAME = 4, XMETADATA_STATS = 5 };

/* An entry of a protobuf map<K, V> (XPlane's metadata maps). */
enum pb_map_field { PB_MAP_KEY = 1, PB_MAP_VALUE = 2 };

enum profile_response_field {
	PROFILE_RESPONSE_TOOL_DATA = 6,
	PROFILE_RESPONSE_EMPTY_TRACE = 7,
	PROFILE_RESPONSE_XSPACE = 8,
};

enum profile_tool_data_field { PROFILE_TOOL_DATA_NAME = 1, PROFILE_TOOL_DATA_DATA = 2 };

/* The one-byte key of field @field (< 16) with wire type @wt (pbread.h),
 * for the encoder's hand-framed records. */
#define PB_KEY1(field, wt) ((uint8_t)((field) << 3 | (wt)))
