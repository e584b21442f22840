//! Each command lists the flags it uses: the NVML options on the commands that open NVML, none
//! on those that read files.

use super::support::{fixture, gpulse, run};

const NVML_FLAGS: [&str; 3] = ["--nvml-lib", "--no-gpm", "--gpm-interval"];

#[test]
fn only_commands_that_open_nvml_list_its_flags() {
    for verb in ["diagnose", "report", "export", "compare", "import", "demo"] {
        let (code, help, err) = run(gpulse(None).args([verb, "--help"]));
        assert_eq!(code, 0, "{verb}: {err}");
        for flag in NVML_FLAGS {
            assert!(!help.contains(flag), "{verb} lists {flag}:\n{help}");
        }
    }
    for verb in ["status", "query", "watch", "record", "run", "attach", "serve", "top"] {
        let (code, help, err) = run(gpulse(None).args([verb, "--help"]));
        assert_eq!(code, 0, "{verb}: {err}");
        for flag in NVML_FLAGS {
            assert!(help.contains(flag), "{verb} lacks {flag}:\n{help}");
        }
    }
}

#[test]
fn a_file_reading_command_refuses_an_nvml_flag_and_nvml_commands_take_it_either_side() {
    let rec = fixture("h200-gpulse-run/dl_bound.db");
    let (code, _, err) = run(gpulse(None).args(["diagnose", "--no-gpm"]).arg(&rec));
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("error: unexpected argument '--no-gpm' found"), "{err}");
    // Before the command (for the bare `gpulse`, which is `status`) or after it: the same.
    for args in [&["--no-gpm", "status"][..], &["status", "--no-gpm"], &["--no-gpm"]] {
        let (code, out, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains("(GPM off: --no-gpm)"), "{args:?}: {out}");
    }
}

/// `--nvml-lib` typed before the command or on it wins over GPULSE_NVML_LIB (which the tests set
/// to the stand-in).
#[test]
fn a_typed_nvml_lib_wins_over_the_environment_on_either_side() {
    for args in [&["--nvml-lib", "/no/such/libnvml.so", "status"][..], &["status", "--nvml-lib", "/no/such/libnvml.so"]]
    {
        let (code, _, err) = run(gpulse(Some("scenarios/h200_idle.json")).args(args));
        assert_eq!(code, 9, "{args:?}: {err}");
        assert!(err.starts_with("gpulse: cannot load the NVML library /no/such/libnvml.so: "), "{args:?}: {err}");
    }
}
