//! ffmpeg's way of writing a filter, taken as framepipe's: `scale=320:180`,
//! `crop=w=640:h=360:x=0:y=0`, `pad=…:color=0x102030`, `transpose=dir=clock`, `fps=30000/1001`,
//! `gblur=sigma=2`, `negate`, `format=gray`: a user coming from `-vf` writes what they know,
//! and it runs as `scale:320:180` would.
//!
//! Invariants: only ffmpeg's names of filters framepipe has are translated, with their options
//! by place or by name as ffmpeg orders them; an option ffmpeg's filter has and framepipe's
//! does not, or one neither has, is refused naming it (with the nearest names); anything else
//! is left to the chain's own parser.

use super::FilterError;

/// ffmpeg's filters framepipe has: ffmpeg's name, framepipe's, and the names of the options
/// in ffmpeg's order (each with its other names).
const FILTERS: &[(&str, &str, &[&[&str]])] = &[
    (
        "scale",
        "scale",
        &[&["w", "width"], &["h", "height"], &["flags"]],
    ),
    (
        "crop",
        "crop",
        &[&["w", "out_w"], &["h", "out_h"], &["x"], &["y"]],
    ),
    (
        "pad",
        "pad",
        &[
            &["w", "width"],
            &["h", "height"],
            &["x"],
            &["y"],
            &["color"],
        ],
    ),
    ("transpose", "transpose", &[&["dir"]]),
    ("fps", "fps", &[&["fps"]]),
    ("gblur", "gauss", &[&["sigma"]]),
    ("negate", "invert", &[]),
    ("format", "gray", &[&["pix_fmts"]]),
];

/// framepipe's filter name and arguments for `token` where it is ffmpeg's form of a filter
/// framepipe has (`name=options`, or a name of ffmpeg's own such as `negate`); None where
/// it is not.
pub fn translate(token: &str) -> Option<Result<(String, Vec<String>), FilterError>> {
    let (name, options) = match token.split_once('=') {
        Some((name, options)) if !name.contains(':') => (name, Some(options)),
        Some(_) => return None,
        None => (token, None),
    };
    let name = name.to_ascii_lowercase();
    let &(_, ours, keys) = FILTERS.iter().find(|(theirs, ..)| *theirs == name)?;
    // A bare name that framepipe also has (`scale` alone) is framepipe's to judge.
    if options.is_none() && ours == name {
        return None;
    }
    Some(arguments(&name, keys, options.unwrap_or("")).and_then(|args| finish(&name, ours, args)))
}

/// ffmpeg's `options` of filter `name` (`a:b:key=c`) in the order of `keys`: by place until
/// the first named one, then by name.
fn arguments(name: &str, keys: &[&[&str]], options: &str) -> Result<Vec<String>, FilterError> {
    let mut args: Vec<Option<String>> = vec![None; keys.len()];
    let parts = options.split(':').filter(|p| !p.is_empty());
    for (place, part) in parts.enumerate() {
        let (at, value) = match part.split_once('=') {
            Some((key, value)) => {
                let at = keys.iter().position(|names| names.contains(&key));
                let at = at.ok_or_else(|| unknown_option(name, key, keys))?;
                (at, value)
            }
            None if place < keys.len() => (place, part),
            None => {
                return Err(FilterError::Ffmpeg {
                    filter: name.into(),
                    why: format!("'{part}' is one option more than framepipe's takes"),
                })
            }
        };
        args[at] = Some(value.to_string());
    }
    // Options given up to the last one named; those after it left to framepipe's defaults.
    let given = args.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    args.truncate(given);
    args.into_iter()
        .enumerate()
        .map(|(at, a)| {
            a.ok_or_else(|| FilterError::Ffmpeg {
                filter: name.into(),
                why: format!("'{}' must be given where a later option is", keys[at][0]),
            })
        })
        .collect()
}

/// An option filter `name` does not have, with the nearest of those it has.
fn unknown_option(name: &str, key: &str, keys: &[&[&str]]) -> FilterError {
    let known: Vec<&str> = keys.iter().flat_map(|k| k.iter().copied()).collect();
    FilterError::Ffmpeg {
        filter: name.into(),
        why: format!(
            "no option '{key}' framepipe takes{} (it takes {})",
            crate::spelling::did_you_mean(key, &known),
            known.join(", ")
        ),
    }
}

/// framepipe's arguments made of ffmpeg's values where their words differ.
fn finish(
    name: &str,
    ours: &str,
    mut args: Vec<String>,
) -> Result<(String, Vec<String>), FilterError> {
    let refuse = |why: String| FilterError::Ffmpeg {
        filter: name.into(),
        why,
    };
    match name {
        "scale" if args.len() == 3 => {
            args[2] = match args[2].as_str() {
                "area" => "area".into(),
                "bilinear" | "fast_bilinear" => "bilinear".into(),
                other => {
                    return Err(refuse(format!(
                        "flags={other}: framepipe scales by area or bilinear (its default)"
                    )))
                }
            };
        }
        "fps" => {
            let rate = args.first().map(String::as_str).unwrap_or("");
            args = vec![fraction(rate).ok_or_else(|| refuse(format!("'{rate}' is not a rate")))?];
        }
        "pad" => {
            if let Some(colour) = args.get_mut(4) {
                *colour = colour_of(colour).ok_or_else(|| {
                    refuse(format!("colour '{colour}': 0xRRGGBB, #RRGGBB or black, white, gray, red, green, blue"))
                })?;
            }
        }
        "format" => {
            if args.as_slice() != ["gray"] {
                return Err(refuse(format!(
                    "framepipe converts to gray alone here (format=gray), not '{}'",
                    args.join(":")
                )));
            }
            args.clear();
        }
        _ => {}
    }
    Ok((ours.to_string(), args))
}

/// A rate written as ffmpeg writes it: `25`, `29.97`, `30000/1001`, `ntsc`, `pal`.
fn fraction(rate: &str) -> Option<String> {
    let value = match rate {
        "ntsc" => 30000.0 / 1001.0,
        "pal" => 25.0,
        "film" => 24.0,
        _ => match rate.split_once('/') {
            Some((n, d)) => n.parse::<f64>().ok()? / d.parse::<f64>().ok()?,
            None => rate.parse::<f64>().ok()?,
        },
    };
    value.is_finite().then(|| value.to_string())
}

/// An ffmpeg colour as framepipe's `RRGGBB`.
fn colour_of(colour: &str) -> Option<String> {
    let hex = colour
        .strip_prefix("0x")
        .or_else(|| colour.strip_prefix('#'))
        .unwrap_or(colour);
    if hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Some(hex.to_string());
    }
    let named = match colour.to_ascii_lowercase().as_str() {
        "black" => "000000",
        "white" => "ffffff",
        "gray" | "grey" => "808080",
        "red" => "ff0000",
        "green" => "008000",
        "blue" => "0000ff",
        _ => return None,
    };
    Some(named.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(token: &str) -> (String, Vec<String>) {
        translate(token).expect("ffmpeg's form").expect("taken")
    }

    #[test]
    fn ffmpegs_forms_become_framepipes() {
        assert_eq!(
            taken("scale=320:180"),
            ("scale".into(), vec!["320".into(), "180".into()])
        );
        assert_eq!(taken("scale=w=320:h=-2").1, ["320", "-2"]);
        assert_eq!(taken("scale=320:180:flags=area").1, ["320", "180", "area"]);
        assert_eq!(taken("crop=w=64:h=32:x=0:y=8").1, ["64", "32", "0", "8"]);
        assert_eq!(taken("crop=64:32").1, ["64", "32"]);
        assert_eq!(
            taken("pad=400:300:10:20:color=0x102030").1,
            ["400", "300", "10", "20", "102030"]
        );
        assert_eq!(taken("transpose=1"), ("transpose".into(), vec!["1".into()]));
        assert_eq!(taken("negate"), ("invert".into(), vec![]));
        assert_eq!(taken("format=gray"), ("gray".into(), vec![]));
        assert_eq!(taken("gblur=sigma=2"), ("gauss".into(), vec!["2".into()]));
        let (_, rate) = taken("fps=30000/1001");
        assert!((rate[0].parse::<f64>().unwrap() - 29.97).abs() < 0.01);
        assert!(translate("scale:320:180").is_none());
        assert!(translate("scale").is_none());
        assert!(translate("hflip").is_none());
        assert!(translate("eq=contrast=2").is_none());
    }

    #[test]
    fn what_framepipe_does_not_take_is_named() {
        let err = |t: &str| translate(t).unwrap().unwrap_err().to_string();
        assert!(err("scale=w=320:hieght=180").contains("did you mean 'height'"));
        assert!(err("crop=x=4").contains("'w' must be given"));
        assert!(err("format=yuv420p").contains("gray alone"));
        assert!(err("scale=1:2:3:4").contains("one option more"));
        assert!(err("fps=fast").contains("not a rate"));
    }
}
