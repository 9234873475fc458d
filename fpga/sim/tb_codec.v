// SPDX-License-Identifier: Apache-2.0
// iverilog testbench of the codec RTL: replays the hex vectors written by
// `tb_codec --vectors DIR` (fpga/sim/vectors.h), with random valid/ready
// stalls, and compares every record beat and every decoded page beat.
// Prints "FPGA-IVERILOG PASS" or "FPGA-IVERILOG FAIL".
//   iverilog -g2012 -I fpga/rtl -o tb.vvp fpga/sim/tb_codec.v fpga/rtl/*.v
//   vvp tb.vvp +vec=DIR [+seed=N] [+stall=PCT]
`timescale 1ns / 1ps
`default_nettype none
module tb_codec;
  parameter integer MODES = 18;         // set with -Ptb_codec.MODES=N (codec::kModeCount)
  parameter integer DW = 512;           // -Ptb_codec.DW=256 with vectors from `fpga_vecgen --beat 32`
  localparam integer BB = DW / 8;
  localparam integer NBW = $clog2(BB + 1);
  localparam integer MAXV = 1 << 14;

  reg clk = 1'b0;
  reg rst = 1'b1;
  always #1 clk = ~clk;

  reg [DW+47:0] enc_in  [0:MAXV-1];
  reg [DW+15:0] enc_exp [0:MAXV-1];
  reg [DW+15:0] dec_in  [0:MAXV-1];
  reg [DW+15:0] dec_exp [0:MAXV-1];
  reg [31:0]    dec_st  [0:MAXV-1];
  reg [31:0]    counts  [0:5];

  reg                 enc_in_valid, enc_in_last, enc_out_ready;
  wire                enc_in_ready, enc_out_valid, enc_out_last;
  reg  [DW-1:0]       enc_in_data;
  reg  [NBW-1:0]      enc_in_nbytes;
  reg  [7:0]          enc_cfg_mode, enc_cfg_dtype;
  reg  [15:0]         enc_cfg_channels;
  wire [DW-1:0]       enc_out_data;
  wire [NBW-1:0]      enc_out_nbytes;
  reg                 dec_in_valid, dec_in_last, dec_out_ready, dec_st_ready;
  wire                dec_in_ready, dec_out_valid, dec_out_last, dec_st_valid;
  reg  [DW-1:0]       dec_in_data;
  reg  [NBW-1:0]      dec_in_nbytes;
  wire [DW-1:0]       dec_out_data;
  wire [NBW-1:0]      dec_out_nbytes;
  wire [3:0]          dec_st_code;

  speckv_codec_top #(.DW(DW), .MAX_BYTES(4096), .MODES(MODES)) dut (
    .clk(clk), .rst(rst),
    .enc_in_valid(enc_in_valid), .enc_in_ready(enc_in_ready), .enc_in_data(enc_in_data),
    .enc_in_nbytes(enc_in_nbytes), .enc_in_last(enc_in_last), .enc_cfg_mode(enc_cfg_mode),
    .enc_cfg_dtype(enc_cfg_dtype), .enc_cfg_channels(enc_cfg_channels),
    .enc_out_valid(enc_out_valid), .enc_out_ready(enc_out_ready), .enc_out_data(enc_out_data),
    .enc_out_nbytes(enc_out_nbytes), .enc_out_last(enc_out_last),
    .dec_in_valid(dec_in_valid), .dec_in_ready(dec_in_ready), .dec_in_data(dec_in_data),
    .dec_in_nbytes(dec_in_nbytes), .dec_in_last(dec_in_last),
    .dec_out_valid(dec_out_valid), .dec_out_ready(dec_out_ready), .dec_out_data(dec_out_data),
    .dec_out_nbytes(dec_out_nbytes), .dec_out_last(dec_out_last),
    .dec_st_valid(dec_st_valid), .dec_st_ready(dec_st_ready), .dec_st_code(dec_st_code));

  integer seed, stall;
  integer n_ei, n_ee, n_di, n_de, n_pages, n_rec;
  integer ei, ee, di, de, rec, rec_beats, errors, pages_done, cyc, rejected, accepted;
  integer pk2;          // cycles in which the encoder's packer completed two payload words (Rice)
  integer col;          // cycles in which the decoder shortened a zero run of 16 in a split-Rice Unary section
  integer spb;          // split-Rice beats the decoder sent
  reg     rec_bad;
  reg [1023:0] vec;

  function automatic stall_now(input integer dummy);
    begin
      stall_now = (stall > 0) && ((($random(seed) & 32'h7fffffff) % 100) < stall);
    end
  endfunction

  // bytes [0, n) of two beats equal
  function automatic beats_equal(input [DW-1:0] a, input [DW-1:0] b, input [NBW-1:0] n);
    integer i;
    begin
      beats_equal = 1'b1;
      for (i = 0; i < BB; i = i + 1)
        if (i < n && a[i*8 +: 8] !== b[i*8 +: 8]) beats_equal = 1'b0;
    end
  endfunction

  initial begin
    if (!$value$plusargs("vec=%s", vec)) vec = "vectors";
    if (!$value$plusargs("seed=%d", seed)) seed = 1;
    if (!$value$plusargs("stall=%d", stall)) stall = 30;
    $readmemh({vec, "/counts.hex"}, counts);
    n_ei = counts[0]; n_ee = counts[1]; n_di = counts[2]; n_de = counts[3];
    n_pages = counts[4]; n_rec = counts[5];
    $readmemh({vec, "/enc_in.hex"}, enc_in, 0, n_ei - 1);
    $readmemh({vec, "/enc_exp.hex"}, enc_exp, 0, n_ee - 1);
    if (n_di > 0) $readmemh({vec, "/dec_in.hex"}, dec_in, 0, n_di - 1);
    if (n_de > 0) $readmemh({vec, "/dec_exp.hex"}, dec_exp, 0, n_de - 1);
    if (n_rec > 0) $readmemh({vec, "/dec_st.hex"}, dec_st, 0, n_rec - 1);
    ei = 0; ee = 0; di = 0; de = 0; rec = 0; rec_beats = 0; errors = 0; pages_done = 0;
    rec_bad = 1'b0; cyc = 0; rejected = 0; accepted = 0; pk2 = 0; col = 0; spb = 0;
    enc_in_valid = 0; enc_out_ready = 0; dec_in_valid = 0; dec_out_ready = 0; dec_st_ready = 0;
    enc_in_data = 0; enc_in_nbytes = 0; enc_in_last = 0; enc_cfg_mode = 0; enc_cfg_dtype = 0;
    enc_cfg_channels = 0; dec_in_data = 0; dec_in_nbytes = 0; dec_in_last = 0;
    repeat (4) @(posedge clk);
    #0.1 rst = 1'b0;
    while ((ee < n_ee || rec < n_rec) && cyc < 2000000) begin
      // drive (just after the edge)
      enc_in_valid = (ei < n_ei) && !stall_now(0);
      if (ei < n_ei) begin
        {enc_cfg_channels, enc_cfg_dtype, enc_cfg_mode} = enc_in[ei][DW+47:DW+16];
        enc_in_last = enc_in[ei][DW+8];
        enc_in_nbytes = enc_in[ei][DW+7:DW];
        enc_in_data = enc_in[ei][DW-1:0];
      end
      enc_out_ready = !stall_now(0);
      dec_in_valid = (di < n_di) && !stall_now(0);
      if (di < n_di) begin
        dec_in_last = dec_in[di][DW+8];
        dec_in_nbytes = dec_in[di][DW+7:DW];
        dec_in_data = dec_in[di][DW-1:0];
      end
      dec_out_ready = !stall_now(0);
      // the status once no output beat is left pending (the last may go in this cycle)
      dec_st_ready = (!dec_out_valid || dec_out_ready) && !stall_now(0);
      if (dut.g_packed.u_enc.c_go && !dut.g_packed.u_enc.c_mark && dut.g_packed.u_enc.pk_nw == 2'd2) pk2 = pk2 + 1;
      if (dut.g_packed.u_dec.sp_del) col = col + 1;
      if (dut.g_packed.u_dec.sp_go) spb = spb + 1;
      @(posedge clk);
      cyc = cyc + 1;
      // sample (values before the edge are still on the nets at #0 of the edge)
      if (enc_in_valid && enc_in_ready) ei = ei + 1;
      if (dec_in_valid && dec_in_ready) di = di + 1;
      if (enc_out_valid && enc_out_ready) begin
        if (ee >= n_ee || enc_out_last !== enc_exp[ee][DW+8] || enc_out_nbytes !== enc_exp[ee][DW+7:DW] ||
            !beats_equal(enc_out_data, enc_exp[ee][DW-1:0], enc_out_nbytes)) begin
          errors = errors + 1;
          if (errors < 10) $display("MISMATCH encoder record beat %0d (page %0d)", ee, pages_done);
        end
        if (enc_out_last) pages_done = pages_done + 1;
        ee = ee + 1;
      end
      if (dec_out_valid && dec_out_ready) begin
        if (dec_st[rec][7:0] == 8'd0) begin
          if (de >= n_de || dec_out_last !== dec_exp[de][DW+8] || dec_out_nbytes !== dec_exp[de][DW+7:DW] ||
              !beats_equal(dec_out_data, dec_exp[de][DW-1:0], dec_out_nbytes))
            rec_bad = 1'b1;
          de = de + 1;
        end
        rec_beats = rec_beats + 1;
      end
      if (dec_st_valid && dec_st_ready) begin
        if (dec_st[rec][7:0] == 8'd0) begin
          if (dec_st_code != 4'd0 || rec_bad || rec_beats != dec_st[rec][31:8]) begin
            errors = errors + 1;
            if (errors < 10) $display("MISMATCH decoder record %0d: status %0d, %0d beats, expected OK and %0d beats",
                                      rec, dec_st_code, rec_beats, dec_st[rec][31:8]);
          end
          accepted = accepted + 1;
        end else begin
          if (dec_st_code == 4'd0) begin
            errors = errors + 1;
            if (errors < 10) $display("MISMATCH decoder record %0d: accepted, the C++ decoder rejects it", rec);
          end
          rejected = rejected + 1;
        end
        rec = rec + 1;
        rec_beats = 0;
        rec_bad = 1'b0;
      end
      #0.1;
    end
    if (ee != n_ee || rec != n_rec) begin
      errors = errors + 1;
      $display("did not finish: %0d/%0d record beats, %0d/%0d decoder records", ee, n_ee, rec, n_rec);
    end
    $display("iverilog: %0d pages encoded and compared, %0d records decoded (%0d equal, %0d rejected as the C++ does), %0d cycles, %0d mismatches",
             pages_done, rec, accepted, rejected, cyc, errors);
    $display("iverilog: packer wrote two payload words in %0d cycles", pk2);
    $display("iverilog: decoder sent %0d split-Rice beats, shortened a Unary zero run in %0d cycles", spb, col);
    if (errors == 0) $display("FPGA-IVERILOG PASS");
    else $display("FPGA-IVERILOG FAIL");
    $finish;
  end
endmodule
`default_nettype wire
