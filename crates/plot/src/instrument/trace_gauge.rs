//! Cockpit's `trace_gauge`: the Hessian trace (HessTrace summed over layers).

super::base::scatter_gauge!("Trace", trace, "trace", false);
