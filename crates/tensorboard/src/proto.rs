//! The protobuf messages of a TensorBoard event file (TensorFlow's `event.proto` and
//! `summary.proto`), the fields Cockpit writes, derived with `prost`.

/// One record of an event file: the file's version, or one step's summary.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The training step.
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// What the event holds.
    #[prost(oneof = "What", tags = "3, 5")]
    pub what: Option<What>,
}

/// The content of an [`Event`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum What {
    /// The file's version, `brain.Event:2`, in the first event.
    #[prost(string, tag = "3")]
    FileVersion(String),
    /// Tagged values of one step.
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// Tagged values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    /// The values.
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// One tagged value: a number, a histogram or an image.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryValue {
    /// The tag TensorBoard groups by (`cockpit/GradNorm/fc1.weight`).
    #[prost(string, tag = "1")]
    pub tag: String,
    /// The value.
    #[prost(oneof = "Payload", tags = "2, 4, 5")]
    pub payload: Option<Payload>,
}

/// The value of a [`SummaryValue`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Payload {
    /// A number (TensorBoard's scalars are float32).
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    /// An encoded image.
    #[prost(message, tag = "4")]
    Image(Image),
    /// A histogram.
    #[prost(message, tag = "5")]
    Histo(HistogramProto),
}

/// A histogram: bucket `i` counts values in `(bucket_limit[i−1], bucket_limit[i]]`, the first
/// from `−∞`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HistogramProto {
    /// The smallest value.
    #[prost(double, tag = "1")]
    pub min: f64,
    /// The largest value.
    #[prost(double, tag = "2")]
    pub max: f64,
    /// The number of values.
    #[prost(double, tag = "3")]
    pub num: f64,
    /// Their sum.
    #[prost(double, tag = "4")]
    pub sum: f64,
    /// The sum of their squares.
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    /// The buckets' right edges.
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    /// The buckets' counts.
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}

/// An encoded image (PNG).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Image {
    /// Height in pixels.
    #[prost(int32, tag = "1")]
    pub height: i32,
    /// Width in pixels.
    #[prost(int32, tag = "2")]
    pub width: i32,
    /// Channels: 3 for RGB.
    #[prost(int32, tag = "3")]
    pub colorspace: i32,
    /// The encoded bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub encoded_image_string: Vec<u8>,
}
