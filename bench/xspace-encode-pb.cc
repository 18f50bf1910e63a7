// SPDX-License-Identifier: MIT
//
// xspace-encode-pb.cc - the protobuf C++ peer of bench/xspace-encode: the
// same workload built as tensorflow.profiler.XSpace objects the way the
// upstream server's XPlaneBuilder fills them (one XEvent per record, its
// XStats added one by one, metadata found or created by name per event),
// then serialised with SerializeToString.
//
// Memory: the upstream server keeps its XSpace as an ordinary (heap)
// object, so that is the reference; the Arena variant (xplane.proto sets
// cc_enable_arenas) is measured too, for information.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "xplane.pb.h"
#include "xspace-encode.h"

namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;
using tensorflow::profiler::XStatMetadata;

// Per-plane name -> metadata lookup with ids from 1 upward, like upstream's
// builder. Keys view the names held by the metadata messages themselves
// (map values keep their address).
class PlaneBuilder {
public:
	explicit PlaneBuilder(XPlane *p) : plane_(p) {}

	XEventMetadata *EventMetadata(std::string_view name)
	{
		auto it = events_.find(name);
		if (it != events_.end())
			return it->second;
		int64_t id = (int64_t)events_.size() + 1;
		XEventMetadata &md = (*plane_->mutable_event_metadata())[id];
		md.set_id(id);
		md.set_name(name.data(), name.size());
		events_.emplace(std::string_view(md.name()), &md);
		return &md;
	}

	XStatMetadata *StatMetadata(std::string_view name)
	{
		auto it = stats_.find(name);
		if (it != stats_.end())
			return it->second;
		int64_t id = (int64_t)stats_.size() + 1;
		XStatMetadata &md = (*plane_->mutable_stat_metadata())[id];
		md.set_id(id);
		md.set_name(name.data(), name.size());
		stats_.emplace(std::string_view(md.name()), &md);
		return &md;
	}

	XStat *PlaneStat(std::string_view name)
	{
		XStat *s = plane_->add_stats();
		s->set_metadata_id(StatMetadata(name)->id());
		return s;
	}

	XLine *Line(int64_t id, const char *name)
	{
		XLine *l = plane_->add_lines();
		l->set_id(id);
		l->set_name(name);
		return l;
	}

	XPlane *plane() { return plane_; }

private:
	XPlane *plane_;
	std::unordered_map<std::string_view, XEventMetadata *> events_;
	std::unordered_map<std::string_view, XStatMetadata *> stats_;
};

void Build(const struct wl *w, XSpace *space)
{
	XPlane *gp = space->add_planes();
	gp->set_id(0);
	gp->set_name(WL_GPU_PLANE);
	XPlane *hp = space->add_planes();
	hp->set_id(1);
	hp->set_name(WL_HOST_PLANE);
	PlaneBuilder gpu(gp), host(hp);

	gpu.PlaneStat("device_vendor")->set_str_value(WL_VENDOR);
	gpu.PlaneStat("core_count")->set_int64_value(WL_CORE_COUNT);
	gpu.PlaneStat("memory_size")->set_uint64_value(WL_MEMORY_SIZE);
	const int64_t gcorr = gpu.StatMetadata("correlation_id")->id();
	const int64_t kdetails = gpu.StatMetadata("kernel_details")->id();
	const int64_t ctx = gpu.StatMetadata("context_id")->id();
	XLine *sl[WL_STREAMS], *tl[WL_THREADS];
	for (unsigned s = 0; s < WL_STREAMS; s++)
		sl[s] = gpu.Line(w->stream_id[s], w->stream_name[s]);

	const int64_t hcorr = host.StatMetadata("correlation_id")->id();
	const int64_t devid = host.StatMetadata("device_id")->id();
	for (unsigned i = 0; i < WL_THREADS; i++)
		tl[i] = host.Line(w->thread_id[i], w->thread_name[i]);

	struct wl_gen g;
	struct wl_ev ev;
	wl_gen_init(&g);
	while (wl_next(w, &g, &ev)) {
		if (ev.kind == WL_KERNEL) {
			XEvent *e = sl[ev.line]->add_events();
			e->set_metadata_id(gpu.EventMetadata(w->kernel_name[ev.name])->id());
			e->set_offset_ps((ev.start_ns - w->start_ns) * 1000);
			e->set_duration_ps(ev.dur_ns * 1000);
			XStat *s = e->add_stats();
			s->set_metadata_id(kdetails);
			s->set_ref_value((uint64_t)gpu.StatMetadata(w->kernel_details[ev.name])->id());
			s = e->add_stats();
			s->set_metadata_id(ctx);
			s->set_str_value(WL_CONTEXT_ID);
			s = e->add_stats();
			s->set_metadata_id(gcorr);
			s->set_uint64_value(ev.corr);
		} else {
			XEvent *e = tl[ev.line]->add_events();
			e->set_metadata_id(host.EventMetadata(w->api_name[ev.name])->id());
			e->set_offset_ps((ev.start_ns - w->start_ns) * 1000);
			e->set_duration_ps(ev.dur_ns * 1000);
			XStat *s = e->add_stats();
			s->set_metadata_id(devid);
			s->set_uint64_value(0);
			s = e->add_stats();
			s->set_metadata_id(hcorr);
			s->set_uint64_value(ev.corr);
		}
	}
}

// What the writer adds at the end: the Task Environment plane and the host.
void Finish(const struct wl *w, XSpace *space)
{
	XPlane *tp = space->add_planes();
	tp->set_name("Task Environment");
	PlaneBuilder te(tp);
	te.PlaneStat("profile_start_time")->set_uint64_value((uint64_t)w->start_ns);
	te.PlaneStat("profile_stop_time")->set_uint64_value((uint64_t)w->stop_ns);
	space->add_hostnames(w->hostname);
}

uint64_t CountEvents(const XSpace &space)
{
	uint64_t n = 0;
	for (const XPlane &p : space.planes())
		for (const XLine &l : p.lines())
			n += (uint64_t)l.events_size();
	return n;
}

} // namespace

extern "C" int pb_peer_run(const struct wl *w, int use_arena, int want_hash, struct pb_peer_result *r)
{
	// Leaked on purpose: the caller is a child that exits right after, and
	// destroying 2 M messages is not part of what is measured.
	google::protobuf::Arena *arena = use_arena ? new google::protobuf::Arena() : nullptr;
	XSpace *space = arena ? google::protobuf::Arena::CreateMessage<XSpace>(arena) : new XSpace();
	std::string *out = new std::string();

	double t0 = now_s();
	Build(w, space);
	double t1 = now_s();
	Finish(w, space);
	if (!space->SerializeToString(out))
		return -1;
	double t2 = now_s();

	r->peak_rss = rss_peak();
	r->build_s = t1 - t0;
	r->encode_s = t2 - t1;
	r->out_bytes = out->size();
	r->n_events = CountEvents(*space);
	r->det_hash = 0;
	if (want_hash) {
		// Deterministic mode writes map entries in key order, which is
		// the order profd's writer uses: the bytes can be compared.
		std::string det;
		{
			google::protobuf::io::StringOutputStream sos(&det);
			google::protobuf::io::CodedOutputStream cos(&sos);
			cos.SetSerializationDeterministic(true);
			if (!space->SerializeToCodedStream(&cos))
				return -1;
		}
		r->det_hash = fnv1a64(det.data(), det.size());
	}
	return 0;
}

extern "C" int pb_peer_parse(const void *data, size_t len, uint64_t *n_events)
{
	XSpace space;
	if (len > INT32_MAX || !space.ParseFromArray(data, (int)len))
		return -1;
	*n_events = CountEvents(space);
	return 0;
}
