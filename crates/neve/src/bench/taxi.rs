//! Synthetic Chicago-taxi trips: the real dataset's 23 columns, 2013–2023 (132 months), in
//! random order like the raw download. Deterministic for a given seed.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The taxi schema (timestamps in microseconds, no time zone, as in the public dataset).
pub fn schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    let f = |n: &str, t: DataType| Field::new(n, t, true);
    Arc::new(Schema::new(vec![
        f("trip_id", DataType::Utf8),
        f("taxi_id", DataType::Utf8),
        f("trip_start_timestamp", ts.clone()),
        f("trip_end_timestamp", ts),
        f("trip_seconds", DataType::Int64),
        f("trip_miles", DataType::Float64),
        f("pickup_census_tract", DataType::Int64),
        f("dropoff_census_tract", DataType::Int64),
        f("pickup_community_area", DataType::Int64),
        f("dropoff_community_area", DataType::Int64),
        f("fare", DataType::Float64),
        f("tips", DataType::Float64),
        f("tolls", DataType::Float64),
        f("extras", DataType::Float64),
        f("trip_total", DataType::Float64),
        f("payment_type", DataType::Utf8),
        f("company", DataType::Utf8),
        f("pickup_centroid_latitude", DataType::Float64),
        f("pickup_centroid_longitude", DataType::Float64),
        f("pickup_centroid_location", DataType::Utf8),
        f("dropoff_centroid_latitude", DataType::Float64),
        f("dropoff_centroid_longitude", DataType::Float64),
        f("dropoff_centroid_location", DataType::Utf8),
    ]))
}

const PAYMENT: [(&str, u32); 7] = [
    ("Cash", 45),
    ("Credit Card", 40),
    ("Mobile", 5),
    ("Prcard", 4),
    ("Unknown", 4),
    ("No Charge", 1),
    ("Dispute", 1),
];

const COMPANIES: [&str; 16] = [
    "Flash Cab",
    "Taxi Affiliation Services",
    "Yellow Cab",
    "Sun Taxi",
    "Chicago Carriage Cab Corp",
    "City Service",
    "Medallion Leasin",
    "Taxicab Insurance Agency, LLC",
    "Star North Management LLC",
    "Blue Ribbon Taxi Association Inc.",
    "Choice Taxi Association",
    "Globe Taxi",
    "Dispatch Taxi Affiliation",
    "Northwest Management LLC",
    "KOAM Taxi Association",
    "5 Star Taxi",
];

/// Relative trips per year 2013..=2023 (the real data peaks in 2014–2015 and collapses in 2020).
const YEAR_WEIGHTS: [u32; 11] = [27, 37, 32, 32, 24, 20, 16, 4, 4, 6, 7];

/// Generates batches of taxi rows.
pub struct TaxiGenerator {
    rng: SmallRng,
    taxis: Vec<String>,
    year_cdf: Vec<u32>,
}

impl TaxiGenerator {
    pub fn new(seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let taxis = (0..6000).map(|_| hex(&mut rng, 64)).collect();
        let mut acc = 0;
        let year_cdf = YEAR_WEIGHTS
            .iter()
            .map(|w| {
                acc += w;
                acc
            })
            .collect();
        Self {
            rng,
            taxis,
            year_cdf,
        }
    }

    /// `rows` rows in batches of at most `batch_rows`.
    pub fn batches(&mut self, rows: usize, batch_rows: usize) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut left = rows;
        while left > 0 {
            let n = left.min(batch_rows);
            out.push(self.batch(n));
            left -= n;
        }
        out
    }

    pub fn batch(&mut self, n: usize) -> RecordBatch {
        let r = &mut self.rng;
        let mut trip_id = StringBuilder::with_capacity(n, n * 40);
        let mut taxi_id = StringBuilder::with_capacity(n, n * 64);
        let mut start = TimestampMicrosecondBuilder::with_capacity(n);
        let mut end = TimestampMicrosecondBuilder::with_capacity(n);
        let mut secs = Int64Builder::with_capacity(n);
        let mut miles = Float64Builder::with_capacity(n);
        let mut p_tract = Int64Builder::with_capacity(n);
        let mut d_tract = Int64Builder::with_capacity(n);
        let mut p_area = Int64Builder::with_capacity(n);
        let mut d_area = Int64Builder::with_capacity(n);
        let mut fare = Float64Builder::with_capacity(n);
        let mut tips = Float64Builder::with_capacity(n);
        let mut tolls = Float64Builder::with_capacity(n);
        let mut extras = Float64Builder::with_capacity(n);
        let mut total = Float64Builder::with_capacity(n);
        let mut payment = StringBuilder::with_capacity(n, n * 8);
        let mut company = StringBuilder::with_capacity(n, n * 16);
        let mut p_lat = Float64Builder::with_capacity(n);
        let mut p_lon = Float64Builder::with_capacity(n);
        let mut p_loc = StringBuilder::with_capacity(n, n * 40);
        let mut d_lat = Float64Builder::with_capacity(n);
        let mut d_lon = Float64Builder::with_capacity(n);
        let mut d_loc = StringBuilder::with_capacity(n, n * 40);
        let year_total = *self.year_cdf.last().unwrap();
        for _ in 0..n {
            trip_id.append_value(hex(r, 40));
            taxi_id.append_value(&self.taxis[r.random_range(0..self.taxis.len())]);
            let pick = r.random_range(0..year_total);
            let year = 2013 + self.year_cdf.iter().position(|&c| pick < c).unwrap() as i32;
            let day = r.random_range(0..365);
            let date = chrono::NaiveDate::from_yo_opt(year, day + 1).unwrap();
            let quarter = r.random_range(0..96) as i64; // 15-minute slots, as the real data rounds
            let start_us = date
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp_micros()
                + quarter * 900_000_000;
            let dur: f64 = (r.random::<f64>() * 2.0 + 5.5).exp(); // ~250 s to ~2,700 s
            let dur = dur.round() as i64;
            start.append_value(start_us);
            end.append_value(start_us + ((dur + 899) / 900) * 900_000_000);
            if r.random_ratio(1, 50) {
                secs.append_null()
            } else {
                secs.append_value(dur)
            }
            let m = (-(1.0 - r.random::<f64>()).ln() * 3.5 * 100.0).round() / 100.0;
            miles.append_value(m);
            let tract = |r: &mut SmallRng, b: &mut Int64Builder| {
                if r.random_ratio(1, 3) {
                    b.append_null()
                } else {
                    b.append_value(17_031_000_000 + r.random_range(100..990_000))
                }
            };
            tract(r, &mut p_tract);
            tract(r, &mut d_tract);
            let area = |r: &mut SmallRng, b: &mut Int64Builder| {
                if r.random_ratio(1, 12) {
                    b.append_null()
                } else {
                    b.append_value(r.random_range(1..78))
                }
            };
            area(r, &mut p_area);
            area(r, &mut d_area);
            let f = ((3.25 + 2.25 * m + r.random::<f64>() * 3.0) * 4.0).round() / 4.0;
            let pt = {
                let x = r.random_range(0..100);
                let mut acc = 0;
                PAYMENT
                    .iter()
                    .find(|(_, w)| {
                        acc += w;
                        x < acc
                    })
                    .unwrap()
                    .0
            };
            let t = if pt == "Credit Card" || pt == "Mobile" {
                (f * r.random_range(0.0..0.3) * 100.0).round() / 100.0
            } else {
                0.0
            };
            let tl = if r.random_ratio(1, 100) { 2.5 } else { 0.0 };
            let ex = [0.0, 0.0, 0.0, 1.0, 1.5, 4.0][r.random_range(0..6)];
            fare.append_value(f);
            tips.append_value(t);
            tolls.append_value(tl);
            extras.append_value(ex);
            total.append_value(((f + t + tl + ex) * 100.0).round() / 100.0);
            payment.append_value(pt);
            company.append_value(COMPANIES[r.random_range(0..COMPANIES.len())]);
            let point = |r: &mut SmallRng,
                         lat: &mut Float64Builder,
                         lon: &mut Float64Builder,
                         loc: &mut StringBuilder| {
                if r.random_ratio(1, 10) {
                    lat.append_null();
                    lon.append_null();
                    loc.append_null();
                } else {
                    let la = 41.88 + r.random_range(-0.15..0.15);
                    let lo = -87.63 + r.random_range(-0.12..0.12);
                    lat.append_value(la);
                    lon.append_value(lo);
                    loc.append_value(format!("POINT ({lo:.9} {la:.9})"));
                }
            };
            point(r, &mut p_lat, &mut p_lon, &mut p_loc);
            point(r, &mut d_lat, &mut d_lon, &mut d_loc);
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(trip_id.finish()),
            Arc::new(taxi_id.finish()),
            Arc::new(start.finish()),
            Arc::new(end.finish()),
            Arc::new(secs.finish()),
            Arc::new(miles.finish()),
            Arc::new(p_tract.finish()),
            Arc::new(d_tract.finish()),
            Arc::new(p_area.finish()),
            Arc::new(d_area.finish()),
            Arc::new(fare.finish()),
            Arc::new(tips.finish()),
            Arc::new(tolls.finish()),
            Arc::new(extras.finish()),
            Arc::new(total.finish()),
            Arc::new(payment.finish()),
            Arc::new(company.finish()),
            Arc::new(p_lat.finish()),
            Arc::new(p_lon.finish()),
            Arc::new(p_loc.finish()),
            Arc::new(d_lat.finish()),
            Arc::new(d_lon.finish()),
            Arc::new(d_loc.finish()),
        ];
        RecordBatch::try_new(schema(), cols).expect("taxi batch matches its schema")
    }
}

fn hex(r: &mut SmallRng, len: usize) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    (0..len).map(|_| H[r.random_range(0..16)] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_spread() {
        let a = TaxiGenerator::new(7).batch(2000);
        let b = TaxiGenerator::new(7).batch(2000);
        assert_eq!(a, b);
        assert_eq!(a.num_columns(), 23);
        let ts = a
            .column(2)
            .as_any()
            .downcast_ref::<arrow::array::TimestampMicrosecondArray>()
            .unwrap();
        let months: std::collections::BTreeSet<i64> = ts
            .values()
            .iter()
            .map(|us| us / 1_000_000 / 86_400 / 30)
            .collect();
        assert!(
            months.len() > 100,
            "rows spread over many months: {}",
            months.len()
        );
    }
}
