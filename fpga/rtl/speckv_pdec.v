// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: record decoder of the fixed-width packed entropy
// (docs/codec.md §19: flags bits 2-4 = 4). Same stream interface and status
// codes as speckv_dec; the top sends it the records whose flags byte says
// entropy 4 and it validates them completely (§8 with the widened entropy
// field, §19.1 payload length, §19.5 field and padding checks, CRC32C).
//
// One record at a time:
//   IN     record beats into the record buffer (BB bytes per cycle), CRC32C
//          over bytes 0..19 and 24.. as they arrive, the length counted.
//   CHK    the header, the length and the CRC (one cycle).
//   PAR    one (scale, zero point) pair per cycle: sign / exponent checks.
//   OUT    E elements per cycle: q from the stream (b-bit slices), y =
//          fma(q, sf, zf) in binary32 (one rounding), then FP16-sat / BF16 /
//          FP32; one page beat per cycle.
//   ST     the status word.
// A valid record whose page is larger than MAX_BYTES (it does not fit the
// record buffer) ends with UNSUP after the header, length and CRC checks.
`default_nettype none
module speckv_pdec #(
  parameter integer DW = 512,
  parameter integer MODES = 39,
  parameter integer MAX_BYTES = 4096
) (
  input  wire                       clk,
  input  wire                       rst,
  input  wire                       in_valid,
  output wire                       in_ready,
  input  wire [DW-1:0]              in_data,
  input  wire [$clog2(DW/8+1)-1:0]  in_nbytes,
  input  wire                       in_last,
  output reg                        out_valid,
  input  wire                       out_ready,
  output reg  [DW-1:0]              out_data,
  output reg  [$clog2(DW/8+1)-1:0]  out_nbytes,
  output reg                        out_last,
  output reg                        st_valid,
  input  wire                       st_ready,
  output reg  [3:0]                 st_code
);
  localparam integer BB = DW / 8;
  localparam integer NBW = $clog2(BB + 1);
  localparam integer RBMAX = 24 + MAX_BYTES;
  localparam [3:0] ST_OK = 4'd0, ST_HDR = 4'd1, ST_LEN = 4'd2, ST_CRC = 4'd3, ST_SCALE = 4'd4,
                   ST_STREAM = 4'd5, ST_VALUE = 4'd6, ST_UNSUP = 4'd7;
  localparam [2:0] S_IN = 3'd0, S_CHK = 3'd1, S_PAR = 3'd2, S_OUT = 3'd3, S_ST = 3'd4;

  `include "speckv_codec_fn.vh"
  `include "speckv_packed_fn.vh"

  reg [2:0]  state;
  reg [7:0]  rb [0:RBMAX-1];
  reg [31:0] len, crc, idx, pos;
  reg [31:0] n, C, G, esz, plen, sbase, obytes;
  reg [7:0]  dtype;
  reg [3:0]  bits;
  reg [1:0]  grp;

  assign in_ready = (state == S_IN);

  function automatic [7:0] rbb(input [31:0] k);
    rbb = (k < RBMAX) ? rb[k] : 8'd0;
  endfunction
  function automatic [31:0] rd32(input [31:0] k);
    rd32 = {rbb(k + 3), rbb(k + 2), rbb(k + 1), rbb(k)};
  endfunction

  integer j, k;
  reg [31:0] t, i, g, bp, raw, gg, need, y;
  reg [15:0] s16, z16;
  reg [7:0]  q, b5, b6, b7, sb;
  reg [3:0]  code;
  reg        hok;
  reg [DW-1:0] ob;

  always @(posedge clk) begin
    if (rst) begin
      state <= S_IN;
      len <= 32'd0;
      crc <= 32'hFFFFFFFF;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_nbytes <= {NBW{1'b0}};
      out_data <= {DW{1'b0}};
      st_valid <= 1'b0;
      st_code <= ST_OK;
    end else begin
      case (state)
        S_IN: if (in_valid) begin
          t = crc;
          for (j = 0; j < BB; j = j + 1)
            if (j < in_nbytes) begin
              if (len + j < RBMAX) rb[len + j] = in_data[8*j +: 8];
              if (len + j < 20 || len + j >= 24) begin
                t = t ^ {24'd0, in_data[8*j +: 8]};
                for (k = 0; k < 8; k = k + 1)
                  t = t[0] ? ((t >> 1) ^ 32'h82F63B78) : (t >> 1);
              end
            end
          crc <= t;
          len <= len + in_nbytes;
          if (in_last) state <= S_CHK;
        end
        S_CHK: begin
          // §8 header with entropy 4 (§19)
          b7 = rbb(7);
          n = rd32(8);
          C = {16'd0, rbb(13), rbb(12)};
          dtype = rbb(4);
          b5 = rbb(5);
          b6 = rbb(6);
          bits = b5 > 8'd8 ? 4'd0 : b5[3:0];
          grp = b6[1:0];
          esz = (dtype == 8'd3) ? 32'd4 : (dtype == 8'd0) ? 32'd1 : 32'd2;
          plen = rd32(16);
          hok = len >= 32'd24 && rbb(0) == 8'h53 && rbb(1) == 8'h4B && rbb(2) == 8'd1 && rbb(3) < MODES &&
                rbb(3) != 8'd0 && dtype >= 8'd1 && dtype <= 8'd3 && rbb(14) == 8'd0 && rbb(15) == 8'd0 &&
                n != 32'd0 && n <= 32'h01000000 && C != 32'd0 && (n % (C == 0 ? 32'd1 : C)) == 32'd0 &&
                rbb(5) >= 8'd3 && rbb(5) <= 8'd8 && rbb(6) <= 8'd2 && b7[1:0] == 2'd0 && b7[7:5] == 3'd0 &&
                b7[4:2] == 3'd4;
          raw = n * esz;
          gg = (rbb(6) == 8'd0) ? 32'd1 : (rbb(6) == 8'd1) ? C : n / (C == 0 ? 32'd1 : C);
          G = gg;
          if (hok && (plen < 32'd2 * gg || plen > raw)) hok = 1'b0;
          need = 32'd4 * gg + (n * {28'd0, bits} + 32'd7) / 32'd8;
          code = ST_OK;
          if (!hok) code = ST_HDR;
          else if (plen > len - 32'd24 || len != plen + 32'd24) code = ST_LEN;
          else if (~crc != rd32(20)) code = ST_CRC;
          else if (raw > MAX_BYTES) code = ST_UNSUP;
          else if (plen != need) code = ST_STREAM;
          else if ((n * bits) % 32'd8 != 32'd0 && (rbb(24 + plen - 1) >> ((n * bits) % 32'd8)) != 8'd0) code = ST_STREAM;
          sbase <= 32'd24 + 32'd4 * gg;
          obytes <= raw;
          idx <= 32'd0;
          pos <= 32'd0;
          len <= 32'd0;
          crc <= 32'hFFFFFFFF;
          if (code != ST_OK) begin
            st_code <= code;
            st_valid <= 1'b1;
            state <= S_ST;
          end else begin
            state <= S_PAR;
          end
        end
        S_PAR: begin
          // §19.5: s16 sign 0 and exponent != 31, z16 exponent != 31
          s16 = {rbb(24 + 4*idx + 1), rbb(24 + 4*idx)};
          z16 = {rbb(24 + 4*idx + 3), rbb(24 + 4*idx + 2)};
          if (s16[15] || s16[14:10] == 5'd31 || z16[14:10] == 5'd31) begin
            st_code <= ST_SCALE;
            st_valid <= 1'b1;
            state <= S_ST;
          end else if (idx + 32'd1 >= G) begin
            idx <= 32'd0;
            state <= S_OUT;
          end else begin
            idx <= idx + 32'd1;
          end
        end
        S_OUT: begin
          if (!out_valid || out_ready) begin
            if (out_valid && out_last) begin
              out_valid <= 1'b0;
              out_last <= 1'b0;
              st_code <= ST_OK;
              st_valid <= 1'b1;
              state <= S_ST;
            end else begin
              // BB output bytes: BB / esize elements from element pos / esize
              for (j = 0; j < BB / 2; j = j + 1) begin
                i = pos / esz + j;
                y = 32'd0;
                if (i < n && (esz == 32'd2 || j < BB / 4)) begin
                  q = 8'd0;
                  for (k = 0; k < 8; k = k + 1)
                    if (k < bits) begin
                      bp = i * bits + k;
                      sb = rbb(sbase + (bp >> 3));
                      q[k] = sb[bp[2:0]];
                    end
                  g = (grp == 2'd0) ? 32'd0 : (grp == 2'd1) ? i % C : i / C;
                  s16 = {rbb(24 + 4*g + 1), rbb(24 + 4*g)};
                  z16 = {rbb(24 + 4*g + 3), rbb(24 + 4*g + 2)};
                  y = pk_fma(q, s16, z16);
                end
                if (esz == 32'd4) begin
                  if (j < BB / 4) ob[32*j +: 32] = y;
                end else if (dtype == 8'd2) ob[16*j +: 16] = fp32_to_bf16(y);
                else ob[16*j +: 16] = fp32_to_fp16_sat(y);
              end
              out_data <= ob;
              out_nbytes <= (obytes - pos >= BB) ? BB[NBW-1:0] : (obytes - pos);
              out_last <= (pos + BB >= obytes);
              out_valid <= 1'b1;
              pos <= pos + BB;
            end
          end
        end
        S_ST: begin
          if (st_ready) begin
            st_valid <= 1'b0;
            state <= S_IN;
          end
        end
        default: state <= S_IN;
      endcase
    end
  end
endmodule
`default_nettype wire
