//! Fuzz target: any bytes, as UTF-8 text, must check without a panic, every
//! diagnostic's span inside the input, and rendering must not panic either.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else { return };
    let checked = nax_front::check_source(source);
    for d in &checked.diagnostics {
        assert!(d.span.start <= d.span.end && d.span.end <= source.len());
        for l in &d.labels {
            assert!(l.span.start <= l.span.end && l.span.end <= source.len());
        }
    }
    let _ = nax_front::diagnostics::render_text("fuzz.nax", source, &checked.diagnostics);
});
