//! `gpulse serve`'s answers for 8 GPUs: rendering the exposition of one poll (done once per poll,
//! in the pipeline's sink) and answering `GET /metrics` (a copy of it) over loopback. Run:
//! `cargo bench --bench metrics`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gpulse_live::{Frame, Sink};
use gpulse_model::{DeviceInfo, GpmMetrics, GpuSample, HostSample, Poll, ProcessSample, Snapshot};
use gpulse_report::prometheus::{Exposition, render};
use gpulse_serve::{Auth, Config, Server};

fn gpu(i: u32) -> GpuSample {
    GpuSample {
        gpu_index: i,
        util_gpu_pct: Some(90),
        util_mem_pct: Some(40),
        memory_used_bytes: Some(40 << 30),
        memory_free_bytes: Some(100 << 30),
        memory_reserved_bytes: Some(615 << 20),
        memory_total_bytes: Some(141 << 30),
        temperature_gpu_c: Some(60),
        temperature_memory_c: Some(50),
        power_draw_mw: Some(650_000),
        enforced_power_limit_mw: Some(700_000),
        energy_mj: Some(1 << 40),
        clock_sm_mhz: Some(1980),
        clock_mem_mhz: Some(3201),
        clocks_event_reasons: Some(4),
        gpm: Some(Box::new(GpmMetrics {
            sm_util_pct: Some(80.0),
            sm_occupancy_pct: Some(30.0),
            any_tensor_util_pct: Some(50.0),
            graphics_util_pct: Some(90.0),
            dram_bw_util_pct: Some(40.0),
            fp32_util_pct: Some(10.0),
            fp16_util_pct: Some(0.0),
            fp64_util_pct: Some(0.0),
            pcie_tx_bytes_per_s: Some(1e8),
            pcie_rx_bytes_per_s: Some(2e9),
            ..Default::default()
        })),
        processes: (0..4)
            .map(|p| ProcessSample {
                pid: 1000 + i * 10 + p,
                used_memory_bytes: Some(10 << 30),
                name: Some("python3".into()),
                sm_util_pct: Some(20),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn main() {
    let devices: Vec<DeviceInfo> = (0..8)
        .map(|i| DeviceInfo {
            index: i,
            uuid: format!("GPU-{i:08}"),
            name: "NVIDIA H200".into(),
            pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x19 + i)),
            driver_version: Some("580.159.04".into()),
            ..Default::default()
        })
        .collect();
    let poll = Poll {
        snapshot: Some(Snapshot { timestamp_us: 1, gpus: (0..8).map(gpu).collect() }),
        host: HostSample { timestamp_us: 1, cpu_busy_pct: Some(30.0), ..Default::default() },
        ..Default::default()
    };
    let e = Exposition { devices: &devices, poll: &poll, hostname: "node", host_label: "Hostname", rolling: None };
    let n = 2000;
    let t = Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        bytes = std::hint::black_box(render(&e)).len();
    }
    let render_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!("render, 8 GPUs: {render_us:.1} µs per poll ({bytes} bytes)");

    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start(Config {
        listen,
        auth: std::sync::Arc::new(Auth::new(None, false)),
        hosts: Vec::new(),
        max_subscribers: 8,
        report: None,
        limits: Default::default(),
        web: Default::default(),
    })
    .unwrap();
    let mut sink = server.sink(devices.clone(), "node".into(), "Hostname");
    sink.frame(&Frame { poll: &poll, rolling: None, findings: &[] });
    let addr = server.local_addr();
    let mut times = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut body = Vec::with_capacity(bytes + 512);
        s.read_to_end(&mut body).unwrap();
        assert!(body.len() > bytes);
        times.push(t.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "GET /metrics, 8 GPUs, new connection each: median {:.3} ms, p99 {:.3} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() * 99 / 100])
    );
}
